#include "drills/shared/drill_curve.hpp"

#include <pqxx/pqxx>
#include <stdexcept>

#include "common/ops/worker_keys.hpp"

namespace aclaim::drills {

void register_worker_keys(const std::string& dsn, std::int64_t org,
                          const std::vector<std::string>& names,
                          const std::vector<std::string>& public_keys) {
    if (names.size() != public_keys.size()) {
        throw std::invalid_argument("register_worker_keys: one public key per name");
    }
    pqxx::connection conn(dsn);
    pqxx::work txn(conn, "drill_keys_register");
    for (std::size_t i = 0; i < names.size(); ++i) {
        if (!ops::register_worker_key(txn, org, names[i], public_keys[i])) {
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
        auto pair = ops::make_curve_key_pair();
        publics.push_back(pair.public_key);
        keys.push_back({server_public, std::move(pair.public_key), std::move(pair.secret_key)});
    }
    register_worker_keys(dsn, org, names, publics);
    return keys;
}

}  // namespace aclaim::drills
