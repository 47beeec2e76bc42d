#include "common/ops/worker_keys.hpp"

#include <zmq.h>

#include <array>
#include <cstdint>
#include <stdexcept>

namespace aclaim::common {

CurveKeyPair make_curve_key_pair() {
    std::array<char, 41> pub{};
    std::array<char, 41> sec{};
    if (zmq_curve_keypair(pub.data(), sec.data()) != 0) {
        throw std::runtime_error("this libzmq was built without CURVE support");
    }
    return {pub.data(), sec.data()};
}

void check_worker_key(OrgId org, const std::string& name, const std::string& public_key) {
    if (org <= 0) throw std::invalid_argument("the organization must be a positive id");
    if (name.empty() || name.size() > 128) {
        throw std::invalid_argument("the worker name '" + name + "' must be 1..128 bytes");
    }
    std::array<std::uint8_t, 32> raw{};
    if (public_key.size() != 40 || zmq_z85_decode(raw.data(), public_key.c_str()) == nullptr) {
        throw std::invalid_argument("the public key of '" + name +
                                    "' is not 40 characters of Z85");
    }
}

bool register_worker_key(pqxx::work& txn, OrgId org, const std::string& name,
                         const std::string& public_key) {
    check_worker_key(org, name, public_key);
    return !txn.exec_params("INSERT INTO worker_keys (public_key, org_id, name) VALUES ($1, $2, $3) "
                            "ON CONFLICT (public_key) DO NOTHING RETURNING 1",
                            public_key, org, name)
                .empty();
}

}  // namespace aclaim::common
