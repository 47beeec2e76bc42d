#include "drills/canary.d/process.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "common/base/clock.hpp"

extern char** environ;

namespace aclaim::drills {

namespace {

int decode_status(int status) {
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return -1;
}

}  // namespace

ChildProcess::ChildProcess(const std::vector<std::string>& argv,
                           const std::map<std::string, std::string>& env,
                           const std::string& log_path) {
    if (argv.empty()) throw std::invalid_argument("ChildProcess: empty argv");
    // Everything the child needs is prepared before fork: after it only async-signal-safe calls.
    std::vector<std::string> env_text;
    for (char** e = environ; *e != nullptr; ++e) {
        const std::string entry(*e);
        const auto name = entry.substr(0, entry.find('='));
        if (env.count(name) == 0) env_text.push_back(entry);
    }
    for (const auto& [k, v] : env) {
        std::string entry = k;
        entry += '=';
        entry += v;
        env_text.push_back(std::move(entry));
    }
    std::vector<char*> args, envp;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    for (auto& e : env_text) envp.push_back(e.data());
    envp.push_back(nullptr);
    const int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (log_fd < 0)
        throw std::runtime_error("cannot open " + log_path + ": " + std::strerror(errno));
    const pid_t parent = ::getpid();

    pid_ = ::fork();
    if (pid_ < 0) {
        ::close(log_fd);
        throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
    }
    if (pid_ == 0) {
        ::setpgid(0, 0);
        ::prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (::getppid() != parent) ::_exit(127);
        ::dup2(log_fd, STDOUT_FILENO);
        ::dup2(log_fd, STDERR_FILENO);
        const int null_fd = ::open("/dev/null", O_RDONLY);
        if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
        // The canary blocks SIGINT/SIGTERM for its signal thread; the child must not inherit that.
        sigset_t none;
        sigemptyset(&none);
        ::sigprocmask(SIG_SETMASK, &none, nullptr);
        ::execve(args[0], args.data(), envp.data());
        ::_exit(127);
    }
    ::close(log_fd);
}

ChildProcess::~ChildProcess() {
    if (!exited()) stop(std::chrono::milliseconds(5000));
}

std::optional<int> ChildProcess::exited() {
    if (status_) return status_;
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) status_ = decode_status(status);
    return status_;
}

int ChildProcess::stop(std::chrono::milliseconds grace) {
    if (exited()) return *status_;
    ::kill(pid_, SIGTERM);
    const auto until = base::SystemClock().monotonic_now() + grace;
    while (base::SystemClock().monotonic_now() < until) {
        if (exited()) return *status_;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    status_ = decode_status(status);
    return *status_;
}

std::vector<int> free_local_ports(int count) {
    // The sockets stay bound until every port is known, so the ports are distinct.
    std::vector<int> fds, ports;
    const auto close_all = [&fds] {
        for (int fd : fds) ::close(fd);
    };
    for (int i = 0; i < count; ++i) {
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            close_all();
            throw std::runtime_error("socket: " + std::string(std::strerror(errno)));
        }
        fds.push_back(fd);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        addr.sin_port = 0;
        socklen_t len = sizeof addr;
        if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
            ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
            const std::string why = std::strerror(errno);
            close_all();
            throw std::runtime_error("cannot find a free port: " + why);
        }
        ports.push_back(ntohs(addr.sin_port));
    }
    close_all();
    return ports;
}

std::string own_directory() {
    char buf[4096];
    const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return ".";
    std::string path(buf, static_cast<std::size_t>(n));
    const auto slash = path.rfind('/');
    return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::string tail_of(const std::string& path, int lines) {
    std::ifstream in(path);
    std::deque<std::string> last;
    for (std::string line; std::getline(in, line);) {
        last.push_back(line);
        if (static_cast<int>(last.size()) > lines) last.pop_front();
    }
    std::string out;
    for (const auto& l : last) out += "    | " + l + "\n";
    return out;
}

}  // namespace aclaim::drills
