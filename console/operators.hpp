#pragma once

// Who may use the console: operator accounts in console_operators (schema/0006), passwords kept
// only as libsodium's crypto_pwhash_str, and the signed-in sessions, held in memory (a restart
// signs everybody out, which is the safe direction).

#include <map>
#include <mutex>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "common/base/clock.hpp"
#include "common/store/assignment.hpp"

namespace aclaim::console {

struct Operator {
    std::string name;
    /// nullopt: every organization. Otherwise only these, in ascending order.
    std::optional<std::vector<common::OrgId>> orgs;
    bool sees(common::OrgId org) const;
};

/// Throws std::runtime_error when libsodium cannot be initialised.
void init_crypto();

/// crypto_pwhash_str at the interactive cost.
std::string hash_password(const std::string& password);
bool verify_password(const std::string& hash, const std::string& password);

/// A random token of `bytes` bytes, hex-encoded, from libsodium's CSPRNG.
std::string random_token(std::size_t bytes = 32);

/// Creates the operator, or resets an existing one's password and scope (and enables it again).
void put_operator(pqxx::connection& conn, const Operator& op, const std::string& password);

struct Credentials {
    std::string name;
    std::string password;
};

/// The operator when the name exists, is enabled and the password matches.
std::optional<Operator> authenticate(pqxx::connection& conn, const Credentials& who);

struct Session {
    Operator op;
    std::string csrf;  ///< checked on every POST, in the X-CSRF-Token header
    common::MonotonicTime last_used;
};

/// Signed-in sessions by their cookie token, each ending after `idle` without a request (on the
/// clock's monotonic time). Thread-safe.
class Sessions {
  public:
    explicit Sessions(const common::Clock& clock, common::Duration idle = std::chrono::hours(8))
        : clock_(clock), idle_(idle) {}
    /// Returns the new session's cookie token.
    std::string open(const Operator& op);
    /// The live session for the token, its idle timer restarted.
    std::optional<Session> find(const std::string& token);
    void close(const std::string& token);

  private:
    const common::Clock& clock_;
    common::Duration idle_;
    std::mutex mutex_;
    std::map<std::string, Session> by_token_;
};

}  // namespace aclaim::console
