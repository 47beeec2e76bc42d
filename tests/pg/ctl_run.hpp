#pragma once

// Runs the built aclaimctl as an operator would: arguments, optional standard input, and its
// standard output, standard error and exit code kept apart. Bounded by `timeout`.

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/process.hpp"

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

}  // namespace aclaim::testing
