#pragma once

// The console's HTTP side: the embedded assets, the JSON APIs behind the pages, sign-in, and the
// checks every request passes (a session for every API, the session's CSRF token on every POST,
// security headers on every response).

#include <atomic>
#include <memory>
#include <stdexcept>
#include <string>

#include "console/login_throttle.hpp"
#include "console/operators.hpp"
#include "console/sessions.hpp"
#include "console/views.hpp"

namespace aclaim::http {
class GuardedServer;
}

namespace aclaim::console {

/// The listening address cannot be bound (in use, not an address of this host): named, with why.
class BindError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

class ConsoleServer {
  public:
    /// On the views' clock.
    explicit ConsoleServer(Views& views);
    /// `clock` (which must outlive the server) times sessions, sign-in throttling and the
    /// instants the pages and actions are read and taken at. Sessions are kept in the views'
    /// database (console/sessions.hpp).
    ConsoleServer(Views& views, const base::Clock& clock);
    ~ConsoleServer();
    ConsoleServer(const ConsoleServer&) = delete;
    ConsoleServer& operator=(const ConsoleServer&) = delete;

    /// Binds; returns the port (useful with port 0). Throws BindError, naming the address and
    /// why, when it cannot be bound: in use by another process (a second console included: no
    /// SO_REUSEPORT), or not an address of this host.
    int bind(const std::string& host, int port);
    /// Serves until stop(), which may come from another thread at any time, even before run().
    void run();
    void stop();

  private:
    void routes();

    Views& views_;
    const base::Clock& clock_;
    Sessions sessions_{views_.dsn(), clock_, Sessions::kIdle, views_.turn_wait()};
    LoginThrottle throttle_{clock_};
    std::unique_ptr<http::GuardedServer> server_;
    std::atomic<bool> stopping_{false};
    std::atomic<bool> finished_{false};
};

}  // namespace aclaim::console
