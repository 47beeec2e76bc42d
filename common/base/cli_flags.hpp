#pragma once

// Declaring a program's options on CLI11 the one way every aclaim program does: each flag with its
// ACLAIM_* variable and its default shown in --help, which is where docs/operations.md's tables
// come from (tests/compose/check_compose.py compares them). Header-only, so that only programs
// that parse a command line link CLI11.

#include <CLI/CLI.hpp>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/base/database_deadlines.hpp"
#include "common/base/exit_codes.hpp"
#include "common/base/host_port.hpp"
#include "common/base/org_id.hpp"

namespace aclaim::base {

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

/// A whole number of seconds: `flag` into `field`, read from `env`, at least `least`, its
/// default shown.
inline CLI::Option* add_seconds(CLI::App& app, const std::string& flag, int& field,
                                const std::string& env, int least, const std::string& help) {
    return app.add_option(flag, field, help)
        ->envname(env)
        ->type_name("SECONDS")
        ->check(whole_number(least))
        ->capture_default_str();
}

/// --connect-timeout and --statement-timeout (ACLAIM_CONNECT_TIMEOUT, ACLAIM_STATEMENT_TIMEOUT)
/// into `deadlines`, for every program that reads the database on an operator's behalf.
inline void add_database_deadlines(CLI::App& app, DatabaseDeadlines& deadlines) {
    add_seconds(app, "--connect-timeout", deadlines.connect_timeout_s, "ACLAIM_CONNECT_TIMEOUT", 1,
                "Seconds to wait for the database to answer a connection, per host address "
                "(libpq counts 1 as 2); then exit 3 (a running console answers 503)");
    add_seconds(app, "--statement-timeout", deadlines.statement_timeout_s,
                "ACLAIM_STATEMENT_TIMEOUT", 0,
                "Seconds any one statement may run before the server cancels it (exit 3; a "
                "running console answers 503); 0: no limit");
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

/// Whether `text` is a ZeroMQ endpoint a socket could bind or connect: tcp://HOST:PORT (PORT a
/// number or *), ipc://PATH or inproc://NAME. zmq's own refusal comes only at bind time, as an
/// exception that would exit 1 after logging has started.
inline bool is_zmq_endpoint(std::string_view text) {
    const auto scheme_end = text.find("://");
    if (scheme_end == std::string_view::npos) return false;
    const auto scheme = text.substr(0, scheme_end);
    const auto rest = text.substr(scheme_end + 3);
    if (rest.empty()) return false;
    if (scheme == "ipc" || scheme == "inproc") return true;
    if (scheme != "tcp") return false;
    const auto colon = rest.rfind(':');
    if (colon == std::string_view::npos || colon == 0 || colon + 1 == rest.size()) return false;
    const auto port = rest.substr(colon + 1);
    if (port == "*") return true;
    unsigned value = 0;
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    return ec == std::errc() && end == port.data() + port.size() && value <= 65535;
}

namespace detail {

/// Every option of `app` and of all its subcommands.
inline void all_options(const CLI::App& app, std::vector<const CLI::Option*>& out) {
    for (const auto* o : app.get_options()) out.push_back(o);
    for (const auto* sub : app.get_subcommands([](const CLI::App*) { return true; }))
        all_options(*sub, out);
}

/// Whether the command line itself carries option `o` (--name, --name=VALUE or -n).
inline bool on_command_line(const CLI::Option& o, int argc, const char* const* argv) {
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        for (const auto& l : o.get_lnames()) {
            const std::string flag = "--" + l;
            if (arg == flag || arg.rfind(flag + "=", 0) == 0) return true;
        }
        for (const auto& s : o.get_snames())
            if (arg.rfind("-" + s, 0) == 0) return true;
    }
    return false;
}

/// The ACLAIM_* variable a refused value came from, if it came from one: CLI11 names the flag
/// only, and an operator who never typed the flag would look for it on the command line.
inline std::string variable_source(const CLI::App& app, const std::string& why, int argc,
                                   const char* const* argv) {
    std::vector<const CLI::Option*> options;
    all_options(app, options);
    for (const auto* o : options) {
        const std::string& variable = o->get_envname();
        if (variable.empty() || std::getenv(variable.c_str()) == nullptr) continue;
        if (on_command_line(*o, argc, argv)) continue;
        if (why.find(o->get_name()) == std::string::npos) continue;
        return " (read from " + variable + "='" + std::getenv(variable.c_str()) + "')";
    }
    return "";
}

}  // namespace detail

/// What every aclaim program does with a refused command line (exit_codes.hpp): --help and
/// --version exit 0 as CLI11 prints them; every refusal prints "PROGRAM: why" naming the flag (and
/// the ACLAIM_* variable, when the value came from one) and exits kExitUsage, not CLI11's own
/// codes (104 for a malformed value, 105, 106, 109...) that no document names and that a systemd
/// unit would take for a crash to restart from. A word that is not a command is called that,
/// with the commands there are, instead of CLI11's "A subcommand is required"; an unknown option
/// is named.
inline int parse_error_exit(CLI::App& app, const std::string& program, const CLI::ParseError& e,
                            int argc, const char* const* argv) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    const CLI::App* at = deepest_parsed(app);
    std::string path;
    for (const CLI::App* a = at; a != nullptr && a != &app; a = a->get_parent())
        path.insert(0, " " + a->get_name());
    path.insert(0, program);
    std::string why = e.what();
    // By code: CLI11 names an ExtrasError after the app, not "ExtrasError".
    const bool missing_or_extra =
        e.get_exit_code() == static_cast<int>(CLI::ExitCodes::RequiredError) ||
        e.get_exit_code() == static_cast<int>(CLI::ExitCodes::ExtrasError);
    if (missing_or_extra) {
        // With fallthrough an unknown word may have gone up to the top: look everywhere.
        std::string word;
        std::string option;
        for (const auto& extra : app.remaining(true)) {
            if (extra.empty()) continue;
            if (extra.front() != '-' && word.empty()) word = extra;
            if (extra.front() == '-' && option.empty()) option = extra;
        }
        const bool offers_commands =
            !at->get_subcommands([](const CLI::App*) { return true; }).empty();
        if (!option.empty() && (word.empty() || !offers_commands)) {
            why = "'" + option + "' is not an option";
        } else if (at->get_subcommands().empty() && offers_commands) {
            why = (word.empty() ? std::string("a command is required")
                                : "'" + word + "' is not a command") +
                  "; the commands are: " + command_names(*at);
        }
    } else {
        why += detail::variable_source(app, why, argc, argv);
    }
    std::cerr << program << ": " << why << " (see " << path << " --help)\n";
    return kExitUsage;
}

/// Parses the command line under that policy: nullopt to go on, or the code to exit with.
inline std::optional<int> parse_command_line(CLI::App& app, const std::string& program, int argc,
                                             char** argv) {
    try {
        app.parse(argc, argv);
        return std::nullopt;
    } catch (const CLI::ParseError& e) {
        return parse_error_exit(app, program, e, argc, argv);
    }
}

}  // namespace aclaim::base
