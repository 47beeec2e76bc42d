#pragma once

#include <string_view>

namespace aclaim::base {

/// The project's version, MAJOR.MINOR.PATCH, from the top-level VERSION file (through CMake's
/// PROJECT_VERSION). Every program reports this one; what `--version` prints is
/// proto::version_line(), which adds the protocol versions.
std::string_view project_version();

}  // namespace aclaim::base
