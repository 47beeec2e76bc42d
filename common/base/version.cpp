#include "common/base/version.hpp"

// The only file compiled with the version (common/base/CMakeLists.txt): a new version rebuilds
// this file and relinks, nothing else.
#ifndef ACLAIM_PROJECT_VERSION
#error "ACLAIM_PROJECT_VERSION must be defined by the build (from the top-level VERSION file)"
#endif

namespace aclaim::base {

std::string_view project_version() {
    return ACLAIM_PROJECT_VERSION;
}

}  // namespace aclaim::base
