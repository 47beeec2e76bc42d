#pragma once

// Who may use the console: operator accounts in console_operators (schema/0006), passwords kept
// only as libsodium's crypto_pwhash_str, and the signed-in sessions, held in memory (a restart
// signs everybody out, which is the safe direction).

#include <functional>
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

/// An enabled operator's account as sign-in reads it: who, and the hash to check against.
struct Login {
    Operator op;
    std::string password_hash;
};

/// The enabled operator of that name, if any: one quick read, so that whoever serialises the
/// connection need not hold it while the password is hashed.
std::optional<Login> find_login(pqxx::connection& conn, const std::string& name);

/// Checks `password` against `hash` (true when it matches).
using PasswordCheck = std::function<bool(const std::string& hash, const std::string& password)>;

/// The operator when `login` exists and the password matches. Without a login it spends the time
/// of a real check, so that response times do not reveal names.
std::optional<Operator> check_login(const std::optional<Login>& login, const std::string& password,
                                    const PasswordCheck& check = verify_password);

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
