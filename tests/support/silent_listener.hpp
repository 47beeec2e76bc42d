#pragma once

// A peer that never answers, for tests of what a client does when the other side hangs.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace aclaim::testing {

/// A TCP listener on a free port of 127.0.0.1 that never sends a byte: a database that is frozen,
/// a coordinator whose process hangs, or a route that leads to something that is no server. With
/// Accept::Held a thread accepts every connection and holds it; with Accept::Backlog only the
/// kernel's backlog takes them, as for a process that no longer reaches its accept loop.
class SilentListener {
  public:
    enum class Accept { Held, Backlog };

    explicit SilentListener(Accept accept = Accept::Held) {
        sock_ = ::socket(AF_INET, SOCK_STREAM, 0);
        REQUIRE(sock_ >= 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(::bind(sock_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
        REQUIRE(::listen(sock_, 16) == 0);
        socklen_t len = sizeof addr;
        REQUIRE(::getsockname(sock_, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
        port_ = ntohs(addr.sin_port);
        if (accept == Accept::Backlog) return;
        thread_ = std::thread([this] {
            for (;;) {
                const int c = ::accept(sock_, nullptr, nullptr);
                if (c < 0) return;
                std::lock_guard lock(mutex_);
                accepted_.push_back(c);
            }
        });
    }
    ~SilentListener() {
        ::shutdown(sock_, SHUT_RDWR);
        ::close(sock_);
        if (thread_.joinable()) thread_.join();
        for (const int c : accepted_) ::close(c);
    }
    SilentListener(const SilentListener&) = delete;
    SilentListener& operator=(const SilentListener&) = delete;

    /// A PostgreSQL DSN (keyword form) that leads here.
    std::string dsn() const {
        return "host=127.0.0.1 port=" + std::to_string(port_) + " dbname=aclaim user=aclaim";
    }
    /// A ZeroMQ endpoint that leads here.
    std::string endpoint() const { return "tcp://127.0.0.1:" + std::to_string(port_); }
    /// The connections accepted so far (Accept::Held).
    std::size_t accepted() {
        std::lock_guard lock(mutex_);
        return accepted_.size();
    }

  private:
    int sock_ = -1;
    int port_ = 0;
    std::thread thread_;
    std::mutex mutex_;
    std::vector<int> accepted_;
};

}  // namespace aclaim::testing
