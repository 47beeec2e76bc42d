#pragma once

// The console's signed-in sessions, kept in console_sessions (schema/baseline/tables.sql) so that
// every console process on the database knows each one: consoles behind a load balancer, or one
// restarted, keep an operator signed in, and signing out in one ends the session in all. The
// cookie's token is stored only as its SHA-256; each session ends after an idle time without a
// request, on sign-out, and when its operator is removed, disabled or given a new password.

#include <memory>
#include <optional>
#include <pqxx/pqxx>
#include <string>

#include "common/base/clock.hpp"
#include "console/operators.hpp"
#include "console/turn.hpp"

namespace aclaim::console {

struct Session {
    /// The operator as the account is now: a scope changed since sign-in applies at once.
    Operator op;
    std::string csrf;  ///< checked on every POST, in the X-CSRF-Token header
};

/// The SHA-256 of a cookie token, in hex: the key a session is stored under.
std::string token_hash(const std::string& token);

/// Sessions on their own connection to `dsn`, made on first use and again after it broke, so that
/// a page's slow read never holds up another request's session check. Thread-safe.
class Sessions {
  public:
    static constexpr base::Duration kIdle = std::chrono::hours(8);
    /// How far a session's idle deadline may fall behind before a request writes it forward.
    static constexpr base::Duration kTouchStep = std::chrono::minutes(1);
    /// Expired sessions removed at most per sign-in.
    static constexpr int kPruneBatch = 100;

    /// `clock` (which must outlive this) is what the idle time is counted on; `turn_wait` how
    /// long a request waits for its turn on the connection (console/turn.hpp; none: no bound).
    Sessions(std::string dsn, const base::Clock& clock, base::Duration idle = kIdle,
             std::optional<base::Duration> turn_wait = std::nullopt);
    ~Sessions();
    Sessions(const Sessions&) = delete;
    Sessions& operator=(const Sessions&) = delete;

    /// Opens a session for `op` and returns its cookie token; removes a batch of expired ones.
    std::string open(const Operator& op);
    /// The live session for the token, its idle time started again.
    std::optional<Session> find(const std::string& token);
    /// Signs the session out, in every console.
    void close(const std::string& token);

  private:
    template <typename F>
    auto with_connection(F&& f) -> decltype(f(std::declval<pqxx::connection&>()));

    std::string dsn_;
    const base::Clock& clock_;
    base::Duration idle_;
    std::optional<base::Duration> turn_wait_;
    Turn turn_;
    std::unique_ptr<pqxx::connection> conn_;
};

}  // namespace aclaim::console
