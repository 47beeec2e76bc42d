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
    o.connection.dsn = "postgresql://localhost/aclaim";
    o.router.plaintext = true;
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
    o.router.lease_ms = 3000;
    o.db_pool.db_threads = 7;
    o.reaper.reap_batch = 42;
    o.zap.key_cache_ms = 9;
    o.http.http_bind = "127.0.0.1:0";
    o.curve.curve_secret_key_file = "/run/secrets/curve";

    // Each value is in the one slice whose component reads it; the HTTP endpoint is handed
    // what it reports from theirs.
    CHECK(o.router.lease_ms == 3000);
    CHECK(o.router.effective_heartbeat_ms() == 1000);
    CHECK(o.router.lease().count() == 3000);
    CHECK(o.db_pool.db_threads == 7);
    CHECK(o.reaper.reap_batch == 42);
    CHECK(o.zap.key_cache().count() == 9);
    CHECK(o.curve.curve_secret_key_file == "/run/secrets/curve");
    CHECK(o.http_endpoint().http_bind == "127.0.0.1:0");
    CHECK(o.http_endpoint().dsn == o.connection.dsn);
    CHECK(o.http_endpoint().db_threads == 7);
    CHECK(o.http_endpoint().plaintext);
    CHECK(o.connection.db_deadline_ms == 2000);
    CHECK(o.connection.db_deadline().count() == 2000);
    CHECK(o.presence.interval_ms == 5000);
    // The serving connections' string is the guarded one, computed from the one DSN.
    CHECK(o.connection.guarded_dsn().find("connect_timeout") != std::string::npos);
    CHECK(o.connection.guarded_dsn().find("postgresql://localhost/aclaim") == 0);
}

TEST_CASE("a refused setting is named by its flag, whichever slice holds it", "[options]") {
    CHECK(refusal(valid()).empty());

    auto o = valid();
    o.connection.dsn.clear();
    CHECK(refusal(o).find("--dsn") != std::string::npos);

    o = valid();
    o.router.heartbeat_ms = o.router.lease_ms;
    CHECK(refusal(o).find("--heartbeat-ms") != std::string::npos);

    o = valid();
    o.reaper.reap_batch = 0;
    CHECK(refusal(o).find("--reap-batch") != std::string::npos);

    o = valid();
    o.http.http_bind = "nowhere";
    CHECK(refusal(o).find("--http-bind") != std::string::npos);
    CHECK_THROWS_AS(o.http.validate(), std::invalid_argument);

    o = valid();
    o.zap.key_cache_ms = -1;
    CHECK(refusal(o).find("--key-cache-ms") != std::string::npos);

    o = valid();
    o.router.plaintext = false;
    CHECK(refusal(o).find("--curve-secret-key") != std::string::npos);

    o = valid();
    o.presence.interval_ms = 50;
    CHECK(refusal(o).find("--presence-interval-ms") != std::string::npos);
    o.presence.interval_ms = 0;  // off
    CHECK(refusal(o).empty());

    o = valid();
    o.scheduler.interval_ms = 5;
    CHECK(refusal(o).find("--schedule-interval-ms") != std::string::npos);
    o.scheduler.interval_ms = 0;  // off
    CHECK(refusal(o).empty());

    o = valid();
    o.aging.interval_ms = 5;
    CHECK(refusal(o).find("--aging-interval-ms") != std::string::npos);
    o.aging.interval_ms = 0;  // off
    CHECK(refusal(o).empty());
    o.aging.batch = 0;
    CHECK(refusal(o).find("--aging-batch") != std::string::npos);

    o = valid();
    o.connection.db_deadline_ms = 50;
    CHECK(refusal(o).find("--db-deadline-ms") != std::string::npos);
}

TEST_CASE("--io-threads takes 1..16 ZeroMQ I/O threads", "[options]") {
    auto o = valid();
    CHECK(o.router.io_threads == 1);
    o.router.io_threads = 4;
    CHECK(refusal(o).empty());
    for (const int bad : {0, 17}) {
        o.router.io_threads = bad;
        CHECK(refusal(o) == "--io-threads must be 1..16");
    }
}
