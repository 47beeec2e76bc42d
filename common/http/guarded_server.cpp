#include "common/http/guarded_server.hpp"

#include <netdb.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>

namespace aclaim::http {

namespace {

using SteadyClock = std::chrono::steady_clock;
using Deadline = SteadyClock::time_point;

/// Runs each accepted connection's task on the accept thread itself: the task only hands the
/// socket to the guard's poll thread, which never blocks.
class InlineQueue final : public httplib::TaskQueue {
  public:
    void enqueue(std::function<void()> fn) override { fn(); }
    void shutdown() override {}
};

/// Milliseconds left until `by`, rounded up, so that a wait never ends just before its deadline.
int millis_until(Deadline by, Deadline now) {
    if (by <= now) return 0;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(by - now).count();
    return static_cast<int>(std::min<long long>(left, 60'000));
}

/// Waits until the socket is ready for `events` (or failed, which the next call reports), at
/// most until `by`.
bool wait_ready(int sock, short events, Deadline by) {
    for (;;) {
        const int left = millis_until(by, SteadyClock::now());
        if (left == 0) return false;
        pollfd p{sock, events, 0};
        const int n = ::poll(&p, 1, left);
        if (n > 0) return true;
        if (n < 0 && errno != EINTR) return false;
    }
}

void close_socket(int sock) {
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
}

bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) ==
                      std::tolower(static_cast<unsigned char>(y));
           });
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

/// A Content-Length value: digits only (no sign, no suffix), or nothing.
std::optional<std::uint64_t> parse_length(std::string_view v) {
    if (v.empty() || v.size() > 18) return std::nullopt;
    std::uint64_t n = 0;
    for (const char c : v) {
        if (c < '0' || c > '9') return std::nullopt;
        n = n * 10 + static_cast<std::uint64_t>(c - '0');
    }
    return n;
}

/// httplib's Stream over one connection whose request is already buffered: reads end at the
/// request's deadline and never go past the bytes the guard let through; the whole response must
/// be written within the write deadline.
class GuardedStream final : public httplib::Stream {
  public:
    GuardedStream(int sock, Deadline read_by, std::size_t readable,
                  std::chrono::milliseconds write_budget)
        : sock_(sock), read_by_(read_by), readable_(readable), write_budget_(write_budget) {}

    bool is_readable() const override {
        return pos_ < len_ || (taken_ < readable_ && wait_ready(sock_, POLLIN, read_by_));
    }

    bool is_writable() const override {
        return wait_ready(sock_, POLLOUT, write_by_.value_or(SteadyClock::now() + write_budget_));
    }

    ssize_t read(char* ptr, std::size_t size) override {
        if (pos_ == len_) {
            const std::size_t want = std::min(buf_.size(), readable_ - taken_);
            if (want == 0) return 0;  // the request ends here, whatever else the client sent
            ssize_t n = -1;
            while (n < 0) {
                if (!wait_ready(sock_, POLLIN, read_by_)) return -1;
                n = ::recv(sock_, buf_.data(), want, MSG_DONTWAIT);
                if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return -1;
            }
            if (n == 0) return 0;
            pos_ = 0;
            len_ = static_cast<std::size_t>(n);
            taken_ += len_;
        }
        const std::size_t out = std::min(size, len_ - pos_);
        std::memcpy(ptr, buf_.data() + pos_, out);
        pos_ += out;
        return static_cast<ssize_t>(out);
    }

    ssize_t write(const char* ptr, std::size_t size) override {
        if (!write_by_) write_by_ = SteadyClock::now() + write_budget_;
        std::size_t done = 0;
        while (done < size) {
            if (!wait_ready(sock_, POLLOUT, *write_by_)) return -1;
            const ssize_t n = ::send(sock_, ptr + done, size - done, MSG_DONTWAIT | MSG_NOSIGNAL);
            if (n < 0) {
                if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
                return -1;
            }
            done += static_cast<std::size_t>(n);
        }
        return static_cast<ssize_t>(size);
    }

    void get_remote_ip_and_port(std::string& ip, int& port) const override {
        sockaddr_storage addr{};
        socklen_t len = sizeof addr;
        if (::getpeername(sock_, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
            name(addr, len, ip, port);
    }

    void get_local_ip_and_port(std::string& ip, int& port) const override {
        sockaddr_storage addr{};
        socklen_t len = sizeof addr;
        if (::getsockname(sock_, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
            name(addr, len, ip, port);
    }

    // httplib asks for the descriptor only to refuse one past select()'s FD_SETSIZE (with 500);
    // this stream polls and has no such limit, and a coordinator with thousands of worker
    // connections has descriptors far above it.
    socket_t socket() const override { return sock_ < FD_SETSIZE ? sock_ : INVALID_SOCKET; }

  private:
    static void name(const sockaddr_storage& addr, socklen_t len, std::string& ip, int& port) {
        char host[NI_MAXHOST];
        char serv[NI_MAXSERV];
        if (::getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, host, sizeof host, serv,
                          sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
            ip = host;
            port = std::atoi(serv);
        }
    }

    int sock_;
    Deadline read_by_;
    std::size_t readable_;
    std::size_t taken_ = 0;
    std::array<char, 4096> buf_{};
    std::size_t pos_ = 0;
    std::size_t len_ = 0;
    std::chrono::milliseconds write_budget_;
    std::optional<Deadline> write_by_;
};

}  // namespace

GuardedServer::GuardedServer(HttpGuardOptions options) : options_(std::move(options)) {
    new_task_queue = [] { return new InlineQueue; };
    set_payload_max_length(options_.max_body_bytes);
    wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wake_fd_ < 0) throw std::runtime_error(std::string("eventfd: ") + std::strerror(errno));
    auto start = [this](Pool& pool, std::size_t n) {
        for (std::size_t i = 0; i < n; ++i)
            pool.threads.emplace_back([this, &pool] { work(pool); });
    };
    start(light_, options_.light ? std::max<std::size_t>(options_.light_threads, 1) : 0);
    start(general_, std::max<std::size_t>(options_.threads, 1));
    // Last: the poll thread hands requests to the pools, which must be complete by then.
    watcher_ = std::thread([this] { watch(); });
}

GuardedServer::~GuardedServer() {
    drain();
}

HttpGuardCounts GuardedServer::counts() const {
    return {timed_out_.load(), too_large_.load(), malformed_.load(), overloaded_.load(),
            evicted_.load()};
}

void GuardedServer::raise_backlog() {
    // listen() again on a listening socket only sets its backlog (Linux).
    if (const socket_t sock = svr_sock_; sock != INVALID_SOCKET)
        ::listen(sock, options_.listen_backlog);
}

bool GuardedServer::bind_to_port(const std::string& host, int port, int socket_flags) {
    const bool bound = httplib::Server::bind_to_port(host, port, socket_flags);
    if (bound) raise_backlog();
    return bound;
}

int GuardedServer::bind_to_any_port(const std::string& host, int socket_flags) {
    const int port = httplib::Server::bind_to_any_port(host, socket_flags);
    if (port > 0) raise_backlog();
    return port;
}

bool GuardedServer::listen_after_bind() {
    raise_backlog();
    listened_.store(true, std::memory_order_release);
    return httplib::Server::listen_after_bind();
}

std::size_t GuardedServer::queued() {
    std::size_t n = 0;
    for (Pool* pool : {&light_, &general_}) {
        std::lock_guard lock(pool->mutex);
        n += pool->queue.size();
    }
    return n;
}

bool GuardedServer::process_and_close_socket(socket_t sock) {
    {
        std::lock_guard lock(inbox_mutex_);
        if (!stopping_) {
            inbox_.push_back(sock);
            // Under the lock: drain() closes the descriptor only after it has set stopping_.
            const std::uint64_t one = 1;
            [[maybe_unused]] const auto n = ::write(wake_fd_, &one, sizeof one);
            return true;
        }
    }
    close_socket(sock);
    return false;
}

void GuardedServer::watch() {
    std::vector<pollfd> fds;
    std::vector<Arriving> still;
    for (;;) {
        {
            std::lock_guard lock(inbox_mutex_);
            if (stopping_) break;
            const auto read_by = SteadyClock::now() + options_.request_deadline;
            for (const int s : inbox_) arriving_.push_back({.sock = s, .read_by = read_by});
            inbox_.clear();
        }
        // The oldest first: a client that has taken longest is the likeliest to be holding on.
        while (arriving_.size() > options_.max_arriving) {
            close_socket(arriving_.front().sock);
            arriving_.erase(arriving_.begin());
            evicted_.fetch_add(1, std::memory_order_relaxed);
        }
        fds.clear();
        fds.push_back({wake_fd_, POLLIN, 0});
        auto now = SteadyClock::now();
        int timeout = -1;
        for (const auto& a : arriving_) {
            fds.push_back({a.sock, static_cast<short>(POLLIN | POLLRDHUP), 0});
            const int left = millis_until(a.read_by, now);
            timeout = timeout < 0 ? left : std::min(timeout, left);
        }
        if (::poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) continue;
        if (fds[0].revents != 0) {
            std::uint64_t drained = 0;
            [[maybe_unused]] const auto n = ::read(wake_fd_, &drained, sizeof drained);
        }
        now = SteadyClock::now();
        still.clear();
        for (std::size_t i = 0; i < arriving_.size(); ++i) {
            auto& a = arriving_[i];
            const short events = fds[i + 1].revents;
            Verdict v = events != 0 ? inspect(a) : Verdict::Wait;
            if (v == Verdict::Wait && (events & (POLLRDHUP | POLLHUP | POLLERR)) != 0) {
                // The client closed (or half-closed) before its request was complete.
                close_socket(a.sock);
                v = Verdict::Drop;
            }
            if (v == Verdict::Wait && now >= a.read_by) {
                timed_out_.fetch_add(1, std::memory_order_relaxed);
                refuse(a.sock, "408 Request Timeout");
                v = Verdict::Drop;
            }
            if (v == Verdict::Dispatch) dispatch(a);
            if (v == Verdict::Wait) still.push_back(a);
        }
        arriving_.swap(still);
    }
    for (const auto& a : arriving_) close_socket(a.sock);
    arriving_.clear();
}

GuardedServer::Verdict GuardedServer::inspect(Arriving& a) {
    const std::size_t cap = a.head != 0 ? a.need : options_.max_head_bytes + 1;
    if (peek_.size() < cap) peek_.resize(cap);
    const ssize_t n = ::recv(a.sock, peek_.data(), cap, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return Verdict::Wait;
    if (n <= 0) {
        close_socket(a.sock);
        return Verdict::Drop;
    }
    const std::string_view got(peek_.data(), static_cast<std::size_t>(n));
    if (a.head == 0) {
        // httplib ends the head at the first line that is exactly CRLF; the request line comes
        // before it whatever it holds.
        const auto line_end = got.find('\n');
        const auto blank =
            line_end == std::string_view::npos ? line_end : got.find("\n\r\n", line_end);
        if (blank == std::string_view::npos || blank + 3 > options_.max_head_bytes) {
            if (got.size() <= options_.max_head_bytes) {
                const int want = static_cast<int>(got.size()) + 1;
                if (want != a.low_water) {
                    // Wake the poll thread only once more bytes than it has looked at are here.
                    ::setsockopt(a.sock, SOL_SOCKET, SO_RCVLOWAT, &want, sizeof want);
                    a.low_water = want;
                }
                return Verdict::Wait;
            }
            too_large_.fetch_add(1, std::memory_order_relaxed);
            refuse(a.sock, "431 Request Header Fields Too Large");
            return Verdict::Drop;
        }
        a.head = blank + 3;
        const std::string_view request_line = got.substr(0, line_end);
        const auto sp = request_line.find(' ');
        const std::string_view method = request_line.substr(0, sp);
        std::string_view target =
            sp == std::string_view::npos ? std::string_view() : request_line.substr(sp + 1);
        target = target.substr(0, target.find(' '));
        const std::string_view path = target.substr(0, target.find_first_of("?#"));
        std::optional<std::uint64_t> length;
        bool bad = false;
        for (std::size_t pos = line_end + 1; pos < blank + 1;) {
            const auto next = got.find('\n', pos);
            std::string_view line = got.substr(pos, next - pos);
            pos = next + 1;
            if (line.empty() || line.back() != '\r') continue;  // httplib skips such lines too
            line.remove_suffix(1);
            const auto colon = line.find(':');
            if (colon == std::string_view::npos) continue;
            const auto key = line.substr(0, colon);
            const auto value = trim(line.substr(colon + 1));
            if (iequals(key, "Content-Length")) {
                const auto v = parse_length(value);
                if (!v || (length && *length != *v)) bad = true;
                length = v;
            } else if (iequals(key, "Transfer-Encoding")) {
                // A chunked body's end cannot be known without decoding it: ask for a length.
                malformed_.fetch_add(1, std::memory_order_relaxed);
                refuse(a.sock, "411 Length Required");
                return Verdict::Drop;
            } else if (iequals(key, "Expect") && iequals(value, "100-continue")) {
                a.expect_continue = true;
            }
        }
        if (bad) {
            malformed_.fetch_add(1, std::memory_order_relaxed);
            refuse(a.sock, "400 Bad Request");
            return Verdict::Drop;
        }
        const bool body_allowed = length && *length <= options_.max_body_bytes;
        a.readable = a.head + (body_allowed ? static_cast<std::size_t>(*length) : 0);
        a.need = a.readable;
        a.light = options_.light && options_.light(method, path);
    }
    if (static_cast<std::size_t>(n) >= a.need) return Verdict::Dispatch;
    if (a.expect_continue && !a.continue_sent) {
        // httplib sends its own 100 Continue once it reads the head; a second one is allowed.
        static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
        ::send(a.sock, kContinue.data(), kContinue.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
        a.continue_sent = true;
    }
    const int want = static_cast<int>(n) + 1;
    if (want != a.low_water) {
        ::setsockopt(a.sock, SOL_SOCKET, SO_RCVLOWAT, &want, sizeof want);
        a.low_water = want;
    }
    return Verdict::Wait;
}

void GuardedServer::refuse(int sock, std::string_view status) {
    std::string answer =
        "HTTP/1.1 " + std::string(status) + "\r\nContent-Length: 0\r\nConnection: close\r\n";
    if (status.rfind("503", 0) == 0) answer += "Retry-After: 1\r\n";
    answer += "\r\n";
    ::send(sock, answer.data(), answer.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    close_socket(sock);
}

void GuardedServer::dispatch(const Arriving& a) {
    if (a.low_water != 1) {
        // The stream's reads poll too, and must wake for whatever is left of the request.
        const int one = 1;
        ::setsockopt(a.sock, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof one);
    }
    Pool& pool = a.light && !light_.threads.empty() ? light_ : general_;
    {
        std::lock_guard lock(pool.mutex);
        if (!pool.stopping && pool.queue.size() < options_.max_queued) {
            pool.queue.push_back({a.sock, a.read_by, a.readable});
            pool.wake.notify_one();
            return;
        }
    }
    overloaded_.fetch_add(1, std::memory_order_relaxed);
    refuse(a.sock, "503 Service Unavailable");
}

void GuardedServer::work(Pool& pool) {
    for (;;) {
        Ready r;
        {
            std::unique_lock lock(pool.mutex);
            pool.wake.wait(lock, [&] { return pool.stopping || !pool.queue.empty(); });
            if (pool.queue.empty()) return;
            r = pool.queue.front();
            pool.queue.pop_front();
        }
        serve(r);
    }
}

void GuardedServer::serve(const Ready& r) {
    GuardedStream stream(r.sock, r.read_by, r.readable, options_.write_deadline);
    bool closed = false;
    try {
        // One request per connection: the answer says Connection: close.
        process_request(stream, /*close_connection=*/true, closed, nullptr);
    } catch (...) {
        // httplib answers a handler's exception itself; anything past it (out of memory while
        // writing) ends this connection, not the thread.
    }
    close_socket(r.sock);
}

void GuardedServer::drain() {
    std::call_once(drained_, [this] {
        {
            std::lock_guard lock(inbox_mutex_);
            stopping_ = true;
            for (const int s : inbox_) close_socket(s);
            inbox_.clear();
        }
        const std::uint64_t one = 1;
        [[maybe_unused]] const auto n = ::write(wake_fd_, &one, sizeof one);
        if (watcher_.joinable()) watcher_.join();
        for (Pool* pool : {&light_, &general_}) {
            {
                std::lock_guard lock(pool->mutex);
                pool->stopping = true;
                for (const auto& r : pool->queue) close_socket(r.sock);
                pool->queue.clear();
            }
            pool->wake.notify_all();
            for (auto& t : pool->threads) t.join();
        }
        ::close(wake_fd_);
    });
}

}  // namespace aclaim::http
