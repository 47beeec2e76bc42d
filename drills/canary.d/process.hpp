#pragma once

// The coordinator the canary measures, as a real child process: its own process group (so a
// Ctrl-C at the terminal reaches the canary, which then stops it in order), SIGTERM if the canary
// dies, output into a log file.

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace aclaim::drills {

class ChildProcess {
  public:
    /// Starts argv[0] with argv, the current environment plus `env`, output into log_path
    /// (truncated).
    ChildProcess(const std::vector<std::string>& argv,
                 const std::map<std::string, std::string>& env, const std::string& log_path);
    ~ChildProcess();
    ChildProcess(const ChildProcess&) = delete;
    ChildProcess& operator=(const ChildProcess&) = delete;

    pid_t pid() const { return pid_; }
    /// The exit status if it has ended (128 + signal when killed), without waiting.
    std::optional<int> exited();
    /// SIGTERM, then SIGKILL after `grace`; returns the exit status.
    int stop(std::chrono::milliseconds grace);

  private:
    pid_t pid_ = -1;
    std::optional<int> status_;
};

/// `count` distinct TCP ports on 127.0.0.1 that were free a moment ago.
std::vector<int> free_local_ports(int count);

/// The folder of the running executable.
std::string own_directory();

/// The last `lines` lines of a text file, for error messages.
std::string tail_of(const std::string& path, int lines);

}  // namespace aclaim::drills
