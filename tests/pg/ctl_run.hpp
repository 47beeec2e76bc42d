#pragma once

// Runs the built aclaimctl as an operator would: arguments, optional standard input, and its
// standard output, standard error and exit code kept apart. Bounded by `timeout`.

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/process.hpp"
#include "tests/support/test_database.hpp"

namespace aclaim::testing {

struct CtlResult {
    int code = -1;
    std::string out;
    std::string err;
};

inline std::string shell_quote(const std::string& s) {
    std::string q = "'";
    for (const char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

inline std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

/// aclaimctl ARGS..., with `input` on standard input.
inline CtlResult run_aclaimctl(const std::vector<std::string>& args,
                               const std::string& input = "") {
    std::string dir_template =
        (std::filesystem::temp_directory_path() / "aclaim-ctl-test.XXXXXX").string();
    const std::string dir = ::mkdtemp(dir_template.data());
    const std::string in_path = dir + "/in", out_path = dir + "/out", err_path = dir + "/err";
    std::ofstream(in_path, std::ios::binary) << input;
    std::string cmd = "timeout 60 " + shell_quote(bin("aclaimctl"));
    for (const auto& a : args) cmd += " " + shell_quote(a);
    cmd +=
        " <" + shell_quote(in_path) + " >" + shell_quote(out_path) + " 2>" + shell_quote(err_path);
    const int status = std::system(cmd.c_str());
    CtlResult r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = read_file(out_path);
    r.err = read_file(err_path);
    std::filesystem::remove_all(dir);
    return r;
}

/// aclaimctl --dsn DSN ARGS..., with `input` on standard input.
inline CtlResult run_ctl(const std::string& dsn, const std::vector<std::string>& args,
                         const std::string& input = "") {
    std::vector<std::string> all{"--dsn", dsn};
    all.insert(all.end(), args.begin(), args.end());
    return run_aclaimctl(all, input);
}

/// run_ctl, required to exit 0; its standard error is shown when it does not.
inline CtlResult run_ctl_ok(const std::string& dsn, const std::vector<std::string>& args,
                            const std::string& input = "") {
    auto r = run_ctl(dsn, args, input);
    INFO(r.err);
    REQUIRE(r.code == 0);
    return r;
}

/// The queue's audit log after alice's two `aclaimctl queue set`: `first` and then `second`.
inline void check_settings_log(const TestDatabase& db, const std::string& queue,
                               const std::string& first, const std::string& second) {
    auto conn = db.connect();
    pqxx::read_transaction t(*conn);
    const auto events =
        t.exec_params("SELECT actor, detail FROM queue_events WHERE queue = $1 ORDER BY id", queue);
    REQUIRE(events.size() == 2);
    CHECK(events[0][0].as<std::string>() == "alice");
    CHECK(events[0][1].as<std::string>() == first);
    CHECK(events[1][1].as<std::string>() == second);
}

}  // namespace aclaim::testing
