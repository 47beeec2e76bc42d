// How aclaim-bench's clients authenticate: CURVE with a key registered per client (as deployed
// workers do), or plaintext to measure without encryption.

#include <stdexcept>

#include "drills/bench.d/bench.hpp"
#include "drills/shared/drill_curve.hpp"

namespace aclaim::drills {

void ClientAuth::validate() const {
    if (plaintext) {
        if (!server_key.empty()) {
            throw std::invalid_argument("--plaintext and --curve-server-key exclude each other");
        }
        return;
    }
    if (server_key.empty() || dsn.empty()) {
        throw std::invalid_argument(
            "pass --curve-server-key (the coordinator's public key) and --dsn (where the "
            "clients' keys are registered), or --plaintext");
    }
}

std::vector<worker::CurveKeys> ClientAuth::keys_for(std::int64_t org,
                                                    const std::vector<std::string>& names) const {
    if (plaintext) return std::vector<worker::CurveKeys>(names.size());
    return make_registered_workers(dsn, org, names, server_key);
}

}  // namespace aclaim::drills
