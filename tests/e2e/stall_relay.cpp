#include "tests/e2e/stall_relay.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <stdexcept>

namespace aclaim::testing {

namespace {

sockaddr_in loopback(int port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

/// Writes all of `n` bytes; false when the peer is gone.
bool write_all(int fd, const char* data, ssize_t n) {
    while (n > 0) {
        const ssize_t w = ::send(fd, data, static_cast<std::size_t>(n), MSG_NOSIGNAL);
        if (w <= 0) return false;
        data += w;
        n -= w;
    }
    return true;
}

}  // namespace

StallRelay::StallRelay(int upstream_port) : upstream_port_(upstream_port) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    const int yes = 1;
    ::setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    sockaddr_in a = loopback(0);
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(listener_, 64) != 0 || ::pipe(wake_) != 0) {
        throw std::runtime_error("relay: cannot listen");
    }
    socklen_t len = sizeof a;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { run(); });
}

StallRelay::~StallRelay() {
    stop_.store(true);
    wake();
    thread_.join();
    for (const Pair& p : pairs_) {
        ::close(p.client);
        ::close(p.server);
    }
    ::close(listener_);
    ::close(wake_[0]);
    ::close(wake_[1]);
}

void StallRelay::stall() {
    stalled_.store(true);
    wake();
}

void StallRelay::resume() {
    stalled_.store(false);
    wake();
}

void StallRelay::wake() {
    const char c = 1;
    (void)!::write(wake_[1], &c, 1);
}

void StallRelay::accept_one() {
    const int client = ::accept(listener_, nullptr, nullptr);
    if (client < 0) return;
    const int server = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a = loopback(upstream_port_);
    if (::connect(server, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        ::close(client);
        ::close(server);
        return;
    }
    pairs_.push_back({client, server});
}

bool StallRelay::forward(int from, int to) {
    char buf[65536];
    const ssize_t n = ::recv(from, buf, sizeof buf, 0);
    return n > 0 && write_all(to, buf, n);
}

void StallRelay::run() {
    while (!stop_.load()) {
        const bool stalled = stalled_.load();
        std::vector<pollfd> fds{{wake_[0], POLLIN, 0}, {listener_, POLLIN, 0}};
        if (!stalled) {
            for (const Pair& p : pairs_) {
                fds.push_back({p.client, POLLIN, 0});
                fds.push_back({p.server, POLLIN, 0});
            }
        }
        if (::poll(fds.data(), fds.size(), -1) < 0) continue;
        if (fds[0].revents & POLLIN) {
            char drain[64];
            (void)!::read(wake_[0], drain, sizeof drain);
        }
        if (fds[1].revents & POLLIN) accept_one();
        if (stalled) continue;
        std::vector<Pair> kept;
        for (std::size_t i = 0; i < fds.size() - 2; i += 2) {
            const Pair& p = pairs_[i / 2];
            bool open = true;
            if (fds[i + 2].revents & (POLLIN | POLLHUP | POLLERR)) {
                open = forward(p.client, p.server);
            }
            if (open && (fds[i + 3].revents & (POLLIN | POLLHUP | POLLERR))) {
                open = forward(p.server, p.client);
            }
            if (open) {
                kept.push_back(p);
            } else {
                ::close(p.client);
                ::close(p.server);
            }
        }
        // Connections accepted in this round come after the ones polled.
        for (std::size_t i = (fds.size() - 2) / 2; i < pairs_.size(); ++i)
            kept.push_back(pairs_[i]);
        pairs_ = std::move(kept);
    }
}

}  // namespace aclaim::testing
