#include "common/base/program.hpp"

#include <cstdio>
#include <exception>
#include <stdexcept>

namespace aclaim::base {

int run_program(const char* name, ProgramBody body, int argc, char** argv) {
    try {
        return body(argc, argv);
    } catch (const std::invalid_argument& e) {
        // A value the program refused (an empty password, say): the caller's mistake, exit 2
        // like every other refused argument (exit_codes.hpp), not a failure of the program.
        std::fprintf(stderr, "%s: %s\n", name, e.what());
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: %s\n", name, e.what());
        return 1;
    }
}

}  // namespace aclaim::base
