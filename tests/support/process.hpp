#pragma once

// Real child processes for end-to-end tests: start a built binary, signal it, wait for it with a
// bound. The destructor kills what is still running so a failed test leaves nothing behind.

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/eventually.hpp"

namespace aclaim::testing {

/// The path of a binary built into <build>/bin.
std::string bin(const std::string& name);

class Process {
  public:
    /// Starts argv[0] with the given arguments and extra environment; output goes to log_path
    /// (or is discarded when empty).
    Process(std::vector<std::string> argv, const std::map<std::string, std::string>& env = {},
            std::string log_path = "");
    ~Process();
    Process(const Process&) = delete;
    Process& operator=(const Process&) = delete;

    pid_t pid() const { return pid_; }
    void signal(int sig) const;
    /// Waits for the exit up to `limit`; returns the exit status (128+signal when killed), or
    /// nullopt if it is still running.
    std::optional<int> wait_for(std::chrono::milliseconds limit);
    bool running();
    const std::string& log_path() const { return log_path_; }

  private:
    pid_t pid_ = -1;
    std::optional<int> status_;
    std::string log_path_;
};

/// A free TCP port on 127.0.0.1 (bound to 0, read back, released).
int free_port();

/// The first line of a log that contains `needle`, or "" (also while the file does not exist).
std::string line_with(const std::string& path, const std::string& needle);

}  // namespace aclaim::testing
