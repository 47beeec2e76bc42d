#pragma once

// Declaring a program's options on CLI11 the one way every aclaim program does: each flag with its
// ACLAIM_* variable and its default shown in --help, which is where docs/operations.md's tables
// come from (tests/compose/check_compose.py compares them). Header-only, so that only programs
// that parse a command line link CLI11.

#include <CLI/CLI.hpp>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/base/exit_codes.hpp"
#include "common/base/host_port.hpp"
#include "common/base/org_id.hpp"

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

/// The check behind every --org: CLI11's own numeric checks answer "abc" with a range of doubles.
inline CLI::Validator org_check() {
    return CLI::Validator(
        [](const std::string& text) { return parse_org(text) ? std::string() : org_refusal(text); },
        "");
}

/// A whole number of at least `least`, for counts and ids: CLI::PositiveNumber answers "abc" with
/// "Value abc not in range 0.000000 to 1797693..." (a range of doubles).
inline CLI::Validator whole_number(std::int64_t least) {
    return CLI::Validator(
        [least](const std::string& text) {
            std::int64_t n = 0;
            const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
            if (ec == std::errc() && end == text.data() + text.size() && n >= least)
                return std::string();
            return "'" + text + "' is not a whole number from " + std::to_string(least) + " up";
        },
        "");
}

/// --org into `field` (an integer, or a vector of them for a repeated flag), checked by
/// org_check(). No variable: an organization is what a command acts on, not a setting; a program
/// whose organization is a setting adds its own envname().
template <class T>
CLI::Option* add_org(CLI::App& app, T& field, const std::string& help) {
    return app.add_option("--org", field, help)->type_name("ORG")->check(org_check());
}

/// The check behind every host:port option (parse_host_port() must accept it).
inline CLI::Validator host_port_check() {
    return CLI::Validator(
        [](const std::string& text) {
            return parse_host_port(text) ? std::string()
                                         : "'" + text + "' is not host:port (a port 0..65535)";
        },
        "");
}

/// A listening address setting: `flag` into `field`, read from the flag's variable, its default
/// shown, refused at parse time unless parse_host_port() accepts it.
inline CLI::Option* add_host_port(CLI::App& app, const std::string& flag, std::string& field,
                                  const std::string& help) {
    return add_setting(app, flag, field, help)->type_name("HOST:PORT")->check(host_port_check());
}

/// The database every program reads: --dsn or ACLAIM_DSN, a libpq conninfo or URI. An empty one
/// is none given; a missing one is the program's to refuse, when it needs it (--help does not),
/// in the words of missing_dsn_message().
inline CLI::Option* add_dsn(CLI::App& app, std::string& field) {
    return app
        .add_option("--dsn", field,
                    "PostgreSQL address: libpq conninfo or URI (also accepted after the command)")
        ->envname("ACLAIM_DSN")
        ->type_name("DSN");
}

/// What a program says when it needs the database and was given none.
inline std::string missing_dsn_message() {
    return "no database given: pass --dsn DSN (before or after the command) or set ACLAIM_DSN";
}

/// The deepest subcommand the parse reached: where an unknown word or a missing command belongs.
inline const CLI::App* deepest_parsed(const CLI::App& app) {
    const auto parsed = app.get_subcommands();
    return parsed.empty() ? &app : deepest_parsed(*parsed.front());
}

/// "a, b, c": the commands `app` offers.
inline std::string command_names(const CLI::App& app) {
    std::string out;
    for (const auto* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
        if (!out.empty()) out += ", ";
        out += sub->get_name();
    }
    return out;
}

/// Parses the command line under the operator programs' exit-code policy (exit_codes.hpp):
/// nullopt to go on, or the code to exit with. --help and --version exit 0; every refusal prints
/// "PROGRAM: why" and exits kExitUsage, not CLI11's own codes (105, 106, 109...) that no document
/// names. A word that is not a command is called that, with the commands there are, instead of
/// CLI11's "A subcommand is required".
inline std::optional<int> parse_command_line(CLI::App& app, const std::string& program, int argc,
                                             char** argv) {
    try {
        app.parse(argc, argv);
        return std::nullopt;
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        const CLI::App* at = deepest_parsed(app);
        std::string path;
        for (const CLI::App* a = at; a != nullptr && a != &app; a = a->get_parent())
            path.insert(0, " " + a->get_name());
        path.insert(0, program);
        std::string why = e.what();
        const bool missing_or_extra =
            e.get_name() == "RequiredError" || e.get_name() == "ExtrasError";
        if (missing_or_extra && at->get_subcommands().empty() &&
            !at->get_subcommands([](const CLI::App*) { return true; }).empty()) {
            // With fallthrough an unknown word may have gone up to the top: look everywhere.
            std::string word;
            for (const auto& extra : app.remaining(true)) {
                if (!extra.empty() && extra.front() != '-') {
                    word = extra;
                    break;
                }
            }
            why = (word.empty() ? std::string("a command is required")
                                : "'" + word + "' is not a command") +
                  "; the commands are: " + command_names(*at);
        }
        std::cerr << program << ": " << why << " (see " << path << " --help)\n";
        return kExitUsage;
    }
}

}  // namespace aclaim::common
