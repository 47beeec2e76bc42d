// The coordinator's options, cut into the slices its components take.

#include <catch2/catch.hpp>
#include <stdexcept>
#include <string>

#include "coordinator/options.hpp"

using namespace aclaim;
using namespace aclaim::coordinator;

namespace {

CoordinatorOptions valid() {
    CoordinatorOptions o;
    o.dsn = "postgresql://localhost/aclaim";
    o.plaintext = true;
    return o;
}

std::string refusal(const CoordinatorOptions& o) {
    try {
        o.validate();
    } catch (const std::invalid_argument& e) {
        return e.what();
    }
    return {};
}

}  // namespace

TEST_CASE("each slice carries the parsed values its component needs", "[options]") {
    auto o = valid();
    o.lease_ms = 3000;
    o.db_threads = 7;
    o.reap_batch = 42;
    o.key_cache_ms = 9;
    o.http_bind = "127.0.0.1:0";
    o.curve_secret_key_file = "/run/secrets/curve";

    CHECK(o.router().lease_ms == 3000);
    CHECK(o.router().effective_heartbeat_ms() == 1000);
    CHECK(o.db_pool().lease_ms == 3000);
    CHECK(o.db_pool().db_threads == 7);
    CHECK(o.db_pool().dsn == o.dsn);
    CHECK(o.reaper().reap_batch == 42);
    CHECK(o.zap().key_cache().count() == 9);
    CHECK(o.curve().curve_secret_key_file == "/run/secrets/curve");
    CHECK(o.http().http_bind == "127.0.0.1:0");
    CHECK(o.http().dsn == o.dsn);
    CHECK(o.http().db_threads == 7);
    CHECK(o.router().db_deadline_ms == 2000);
    CHECK(o.db_pool().db_deadline_ms == 2000);
    CHECK(o.reaper().db_deadline_ms == 2000);
    CHECK(o.presence().interval_ms == 5000);
    CHECK(o.presence().dsn == o.dsn);
    CHECK(o.presence().db_deadline_ms == 2000);
}

TEST_CASE("a refused setting is named by its flag, whichever slice holds it", "[options]") {
    CHECK(refusal(valid()).empty());

    auto o = valid();
    o.dsn.clear();
    CHECK(refusal(o).find("--dsn") != std::string::npos);

    o = valid();
    o.heartbeat_ms = o.lease_ms;
    CHECK(refusal(o).find("--heartbeat-ms") != std::string::npos);

    o = valid();
    o.reap_batch = 0;
    CHECK(refusal(o).find("--reap-batch") != std::string::npos);

    o = valid();
    o.http_bind = "nowhere";
    CHECK(refusal(o).find("--http-bind") != std::string::npos);
    CHECK_THROWS_AS(o.http().validate(), std::invalid_argument);

    o = valid();
    o.key_cache_ms = -1;
    CHECK(refusal(o).find("--key-cache-ms") != std::string::npos);

    o = valid();
    o.plaintext = false;
    CHECK(refusal(o).find("--curve-secret-key") != std::string::npos);

    o = valid();
    o.presence_interval_ms = 50;
    CHECK(refusal(o).find("--presence-interval-ms") != std::string::npos);
    o.presence_interval_ms = 0;  // off
    CHECK(refusal(o).empty());

    o = valid();
    o.db_deadline_ms = 50;
    CHECK(refusal(o).find("--db-deadline-ms") != std::string::npos);

    // A claim waiting out its lock timeout must not have its connection cut first.
    o = valid();
    o.lock_strategy = common::LockStrategy::Wait;
    o.lock_timeout_ms = o.db_deadline_ms;
    CHECK(refusal(o).find("--db-deadline-ms") != std::string::npos);
    o.lock_timeout_ms = o.db_deadline_ms - 1;
    CHECK(refusal(o).empty());
}
