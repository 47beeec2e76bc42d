#include "drills/drill_curve.hpp"

#include <zmq.h>

#include <array>
#include <pqxx/pqxx>
#include <stdexcept>

namespace aclaim::drills {

namespace {

/// The rules `aclaimctl keys register` applies before it writes.
void check_registration(std::int64_t org, const std::string& name, const std::string& key) {
    if (org <= 0) throw std::invalid_argument("worker keys need a positive organization id");
    if (name.empty() || name.size() > 128) {
        throw std::invalid_argument("worker name '" + name + "' must be 1..128 bytes");
    }
    std::array<std::uint8_t, 32> raw{};
    if (key.size() != 40 || zmq_z85_decode(raw.data(), key.c_str()) == nullptr) {
        throw std::invalid_argument("public key of '" + name + "' is not 40 characters of Z85");
    }
}

}  // namespace

CurveKeyPair make_curve_key_pair() {
    std::array<char, 41> pub{};
    std::array<char, 41> sec{};
    if (zmq_curve_keypair(pub.data(), sec.data()) != 0) {
        throw std::runtime_error("this libzmq was built without CURVE support");
    }
    return {pub.data(), sec.data()};
}

void register_worker_keys(const std::string& dsn, std::int64_t org,
                          const std::vector<std::string>& names,
                          const std::vector<std::string>& public_keys) {
    if (names.size() != public_keys.size()) {
        throw std::invalid_argument("register_worker_keys: one public key per name");
    }
    for (std::size_t i = 0; i < names.size(); ++i) check_registration(org, names[i], public_keys[i]);
    pqxx::connection conn(dsn);
    pqxx::work txn(conn, "drill_keys_register");
    for (std::size_t i = 0; i < names.size(); ++i) {
        // The statement of `aclaimctl keys register` (coordinator/ctl/cmd_keys.cpp).
        const auto row = txn.exec_params(
            "INSERT INTO worker_keys (public_key, org_id, name) VALUES ($1, $2, $3) "
            "ON CONFLICT (public_key) DO NOTHING RETURNING 1",
            public_keys[i], org, names[i]);
        if (row.empty()) {
            throw std::runtime_error("public key of '" + names[i] +
                                     "' is already registered (keys are never reused)");
        }
    }
    txn.commit();
}

std::vector<worker::CurveKeys> make_registered_workers(const std::string& dsn, std::int64_t org,
                                                       const std::vector<std::string>& names,
                                                       const std::string& server_public) {
    std::vector<worker::CurveKeys> keys;
    std::vector<std::string> publics;
    keys.reserve(names.size());
    publics.reserve(names.size());
    for (std::size_t i = 0; i < names.size(); ++i) {
        auto pair = make_curve_key_pair();
        publics.push_back(pair.public_key);
        keys.push_back({server_public, std::move(pair.public_key), std::move(pair.secret_key)});
    }
    register_worker_keys(dsn, org, names, publics);
    return keys;
}

}  // namespace aclaim::drills
