#include "tests/support/process.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

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
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
        ::setpgid(0, 0);
        const int fd = log_path_.empty()
                           ? ::open("/dev/null", O_WRONLY)
                           : ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            ::dup2(fd, STDOUT_FILENO);
            ::dup2(fd, STDERR_FILENO);
        }
        for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
        std::vector<char*> args;
        args.reserve(argv.size() + 1);
        for (auto& a : argv) args.push_back(a.data());
        args.push_back(nullptr);
        ::execv(args[0], args.data());
        ::_exit(127);
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
    const auto until = common::SystemClock().monotonic_now() + limit;
    while (!status_) {
        int st = 0;
        const pid_t r = ::waitpid(pid_, &st, WNOHANG);
        if (r == pid_) {
            status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            break;
        }
        if (common::SystemClock().monotonic_now() >= until) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return status_;
}

bool Process::running() {
    return !wait_for(std::chrono::milliseconds(0)).has_value();
}

bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds limit) {
    const auto until = common::SystemClock().monotonic_now() + limit;
    while (true) {
        if (condition()) return true;
        if (common::SystemClock().monotonic_now() >= until) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
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

}  // namespace aclaim::testing
