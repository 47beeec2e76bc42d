#include "tests/support/process.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "common/base/clock.hpp"

namespace aclaim::testing {

std::string bin(const std::string& name) {
    return std::string(ACLAIM_BIN_DIR) + "/" + name;
}

Process::Process(std::vector<std::string> argv, const std::map<std::string, std::string>& env,
                 std::string log_path)
    : log_path_(std::move(log_path)) {
    // posix_spawn, not fork: the tests are multithreaded (coordinators, pools), and a fork of a
    // multithreaded process under ThreadSanitizer may hang in its fork handling, or the child in
    // a lock another thread held; posix_spawn runs nothing of ours between the clone and the exec.
    std::vector<std::string> environment;
    for (char** e = environ; *e != nullptr; ++e) {
        const std::string entry(*e);
        const auto eq = entry.find('=');
        if (env.count(entry.substr(0, eq)) == 0) environment.push_back(entry);
    }
    for (const auto& [k, v] : env) environment.push_back(k + "=" + v);
    std::vector<char*> envp;
    envp.reserve(environment.size() + 1);
    for (auto& e : environment) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::vector<char*> args;
    args.reserve(argv.size() + 1);
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    const char* out = log_path_.empty() ? "/dev/null" : log_path_.c_str();
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out, O_WRONLY | O_CREAT | O_APPEND,
                                     0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    // A process group of its own: signals to the test do not reach it.
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
    const int rc = ::posix_spawn(&pid_, args[0], &actions, &attr, args.data(), envp.data());
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
        pid_ = -1;
        throw std::runtime_error("cannot start " + argv.at(0) + ": " + std::strerror(rc));
    }
}

Process::~Process() {
    if (running()) {
        ::kill(pid_, SIGKILL);
        wait_for(std::chrono::seconds(5));
    }
}

void Process::signal(int sig) const {
    ::kill(pid_, sig);
}

std::optional<int> Process::wait_for(std::chrono::milliseconds limit) {
    const auto until = base::SystemClock().monotonic_now() + limit;
    while (!status_) {
        int st = 0;
        const pid_t r = ::waitpid(pid_, &st, WNOHANG);
        if (r == pid_) {
            status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            break;
        }
        if (base::SystemClock().monotonic_now() >= until) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return status_;
}

bool Process::running() {
    return !wait_for(std::chrono::milliseconds(0)).has_value();
}

int free_port() {
    const int s = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    if (::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        ::close(s);
        throw std::runtime_error("free_port: cannot bind a loopback port");
    }
    socklen_t len = sizeof addr;
    ::getsockname(s, reinterpret_cast<sockaddr*>(&addr), &len);
    ::close(s);
    return ntohs(addr.sin_port);
}

std::string line_with(const std::string& path, const std::string& needle) {
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
        if (line.find(needle) != std::string::npos) return line;
    }
    return "";
}

}  // namespace aclaim::testing
