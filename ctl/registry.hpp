#pragma once

#include "ctl/ctl.hpp"

namespace aclaim::ctl {

/// Adds every command family to the application. Add a new family's line in registry.cpp.
void register_all_commands(CLI::App& app, Global& global, Action& action);

}  // namespace aclaim::ctl
