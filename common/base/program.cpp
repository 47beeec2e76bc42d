#include "common/base/program.hpp"

#include <cstdio>
#include <exception>

namespace aclaim::common {

int run_program(const char* name, ProgramBody body, int argc, char** argv) {
    try {
        return body(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: %s\n", name, e.what());
        return 1;
    }
}

}  // namespace aclaim::common
