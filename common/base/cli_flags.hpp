#pragma once

// Declaring a program's options on CLI11 the one way every aclaim program does: each flag with its
// ACLAIM_* variable and its default shown in --help, which is where docs/operations.md's tables
// come from (tests/compose/check_compose.py compares them). Header-only, so that only programs
// that parse a command line link CLI11.

#include <CLI/CLI.hpp>
#include <cctype>
#include <string>
#include <string_view>

namespace aclaim::common {

/// The variable a flag falls back to: --lease-ms reads ACLAIM_LEASE_MS.
inline std::string flag_variable(std::string_view flag) {
    while (!flag.empty() && flag.front() == '-') flag.remove_prefix(1);
    std::string out = "ACLAIM_";
    for (const char c : flag) {
        out += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
    return out;
}

/// `flag` parsed into `field`, read from the flag's own variable (flag_variable()), with the
/// field's value before parsing shown as the default.
template <class T>
CLI::Option* add_setting(CLI::App& app, const std::string& flag, T& field,
                         const std::string& help) {
    return app.add_option(flag, field, help)->envname(flag_variable(flag))->capture_default_str();
}

/// An on|off switch into `field`, its current value shown as the default.
inline CLI::Option* add_on_off(CLI::App& app, const std::string& flag, bool& field,
                               const std::string& help) {
    return app
        .add_option_function<std::string>(
            flag, [&field](const std::string& v) { field = v == "on"; }, help)
        ->envname(flag_variable(flag))
        ->check(CLI::IsMember({"on", "off"}))
        ->default_str(field ? "on" : "off");
}

/// A presence flag into `field`, read from its variable too.
inline CLI::Option* add_switch(CLI::App& app, const std::string& flag, bool& field,
                               const std::string& help) {
    return app.add_flag(flag, field, help)->envname(flag_variable(flag));
}

}  // namespace aclaim::common
