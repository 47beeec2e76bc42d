#pragma once

// Who may use the console: operator accounts in console_operators (schema/baseline/tables.sql),
// passwords kept only as libsodium's crypto_pwhash_str. The signed-in sessions are
// console/sessions.hpp's.

#include <functional>
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
    std::optional<std::vector<store::OrgId>> orgs;
    bool sees(store::OrgId org) const;
};

/// Throws std::runtime_error when libsodium cannot be initialised.
void init_crypto();

/// crypto_pwhash_str at the interactive cost.
std::string hash_password(const std::string& password);
bool verify_password(const std::string& hash, const std::string& password);

/// A random token of `bytes` bytes, hex-encoded, from libsodium's CSPRNG.
std::string random_token(std::size_t bytes = 32);

/// Creates the operator, or resets an existing one's password and scope (and enables it again),
/// ending its sessions: a reset password is often one that got out.
void put_operator(pqxx::connection& conn, const Operator& op, const std::string& password);

/// Removes the operator and its sessions; false when there is no such operator.
bool remove_operator(pqxx::connection& conn, const std::string& name);

/// The operator `name` scoped to `orgs`, a comma-separated list (array_to_string of org_ids) or
/// NULL for every organization.
Operator operator_of(const std::string& name, const pqxx::field& orgs);

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

}  // namespace aclaim::console
