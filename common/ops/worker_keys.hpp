#pragma once

// CURVE key pairs and their registration in worker_keys, shared by `aclaimctl keys`, the drills'
// own clients and the tests: one set of rules for what a registrable key is, one statement.

#include <pqxx/pqxx>

#include <string>

#include "common/store/assignment.hpp"

namespace aclaim::common {

/// One CURVE key pair, Z85 text (40 characters each).
struct CurveKeyPair {
    std::string public_key;
    std::string secret_key;
};

/// A fresh key pair from zmq_curve_keypair. Throws std::runtime_error when libzmq was built
/// without CURVE.
CurveKeyPair make_curve_key_pair();

/// Throws std::invalid_argument, saying what is wrong, unless `org` is positive, `name` is 1..128
/// bytes and `public_key` is 40 characters of valid Z85.
void check_worker_key(OrgId org, const std::string& name, const std::string& public_key);

/// Binds `public_key` to the worker `name` of `org`, after check_worker_key. A name may hold
/// several live keys (rotation); a public key is registered once, ever: false, and nothing
/// written, when it already was (revoked or not).
bool register_worker_key(pqxx::work& txn, OrgId org, const std::string& name,
                         const std::string& public_key);

}  // namespace aclaim::common
