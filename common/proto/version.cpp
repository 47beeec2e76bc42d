#include "common/proto/version.hpp"

#include "common/base/version.hpp"
#include "common/proto/protocol.hpp"

namespace aclaim::proto {

std::string version_line(std::string_view program) {
    std::string line{program};
    line += ' ';
    line += base::project_version();
    line += " (protocol " + std::to_string(kProtocolMajor) + '.' +
            std::to_string(kProtocolOldestMinor) + '-' + std::to_string(kProtocolMajor) + '.' +
            std::to_string(kProtocolNewestMinor) + ')';
    return line;
}

}  // namespace aclaim::proto
