#include "common/ops/worker_keys.hpp"

#include <zmq.h>

#include <array>
#include <cstdint>
#include <stdexcept>

#include "common/ops/worker_keys_sql.hpp"
#include "common/store/pg_array.hpp"
#include "common/store/pg_time.hpp"

namespace aclaim::ops {

CurveKeyPair make_curve_key_pair() {
    std::array<char, 41> pub{};
    std::array<char, 41> sec{};
    if (zmq_curve_keypair(pub.data(), sec.data()) != 0) {
        throw std::runtime_error("this libzmq was built without CURVE support");
    }
    return {pub.data(), sec.data()};
}

void check_worker_key(store::OrgId org, const std::string& name, const std::string& public_key) {
    if (org <= 0) throw std::invalid_argument("the organization must be a positive id");
    if (name.empty() || name.size() > 128) {
        throw std::invalid_argument("the worker name '" + name + "' must be 1..128 bytes");
    }
    std::array<std::uint8_t, 32> raw{};
    if (public_key.size() != 40 || zmq_z85_decode(raw.data(), public_key.c_str()) == nullptr) {
        throw std::invalid_argument("the public key of '" + name + "' is not 40 characters of Z85");
    }
}

bool register_worker_key(pqxx::work& txn, store::OrgId org, const std::string& name,
                         const std::string& public_key,
                         const std::optional<std::vector<std::string>>& queues) {
    check_worker_key(org, name, public_key);
    if (queues) {
        if (queues->empty() || queues->size() > 32)
            throw std::invalid_argument("a key may be limited to 1..32 queues");
        for (const auto& q : *queues) {
            if (!base::valid_queue_name(q))
                throw std::invalid_argument("'" + q + "' is not a valid queue name");
        }
    }
    const std::string limited = queues ? store::pg_array(*queues) : "";
    return !txn.exec_params(sql::kWorkerKeyRegister, public_key, org, name, limited).empty();
}

std::vector<std::string> split_queues(std::string_view list) {
    std::vector<std::string> out;
    while (!list.empty()) {
        const auto comma = list.find(',');
        out.emplace_back(list.substr(0, comma));
        if (comma == std::string_view::npos) break;
        list.remove_prefix(comma + 1);
    }
    return out;
}

namespace {

std::vector<std::string> keys_of(const pqxx::result& rows) {
    std::vector<std::string> keys;
    for (const auto& r : rows) keys.push_back(r["public_key"].as<std::string>());
    return keys;
}

}  // namespace

std::unordered_map<std::string, WorkerKeyOwner> live_worker_key_owners(
    pqxx::transaction_base& txn, const std::vector<std::string>& public_keys) {
    const auto rows = txn.exec_params(sql::kWorkerKeyOwners, store::pg_array(public_keys));
    std::unordered_map<std::string, WorkerKeyOwner> owners;
    for (const auto& row : rows) {
        WorkerKeyOwner owner{row["org_id"].as<store::OrgId>(), row["name"].as<std::string>(), {}};
        if (!row["queues"].is_null()) owner.queues = split_queues(row["queues"].c_str());
        owners.emplace(row["public_key"].as<std::string>(), std::move(owner));
    }
    return owners;
}

std::unordered_set<std::string> live_worker_keys(pqxx::transaction_base& txn,
                                                 const std::vector<std::string>& public_keys) {
    const auto rows = txn.exec_params(sql::kWorkerKeysLive, store::pg_array(public_keys));
    const auto keys = keys_of(rows);
    return {keys.begin(), keys.end()};
}

std::vector<std::string> revoke_worker_key(pqxx::work& txn, const std::string& public_key,
                                           base::Instant now) {
    return keys_of(txn.exec_params(sql::kWorkerKeyRevoke, public_key, now));
}

std::vector<std::string> revoke_worker_keys_named(pqxx::work& txn, const std::string& name,
                                                  store::OrgId org, base::Instant now) {
    return keys_of(txn.exec_params(sql::kWorkerKeysRevokeNamed, name, org, now));
}

}  // namespace aclaim::ops
