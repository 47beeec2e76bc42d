// /metrics, /healthz and /readyz of a coordinator serving real workers over a real database,
// scraped over HTTP the way Prometheus and an orchestrator's probes do.

#include <httplib.h>

#include <catch2/catch.hpp>
#include <map>
#include <sstream>

#include "coordinator/http/http_server.hpp"
#include "tests/pg/coordinator_client.hpp"

using namespace aclaim;
using namespace aclaim::testing;

namespace {

/// Every sample of a scrape, keyed by its name with labels exactly as written.
std::map<std::string, double> parse_samples(const std::string& text) {
    std::map<std::string, double> out;
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) {
        if (line.empty() || line[0] == '#') continue;
        const auto space = line.rfind(' ');
        REQUIRE(space != std::string::npos);
        out[line.substr(0, space)] = std::stod(line.substr(space + 1));
    }
    return out;
}

struct Scraper {
    explicit Scraper(int port) : client("127.0.0.1", port) {}

    httplib::Result get(const std::string& path) {
        auto res = client.Get(path.c_str());
        REQUIRE(res);
        return res;
    }

    std::map<std::string, double> metrics() {
        auto res = get("/metrics");
        REQUIRE(res->status == 200);
        return parse_samples(res->body);
    }

    httplib::Client client;
};

coordinator::HttpOptions http_options(coordinator::CoordinatorOptions o, const std::string& dsn) {
    o.http.http_bind = "127.0.0.1:0";
    o.connection.dsn = dsn;
    return o.http_endpoint();
}

/// A coordinator on a manual clock, and its HTTP endpoint on a free port.
struct HttpCoordinator : ManualCoordinator {
    HttpCoordinator() { http.start(); }

    coordinator::HttpServer http{http_options(h.coordinator->options(), h.db.dsn()),
                                 h.coordinator->metrics()};
};

}  // namespace

TEST_CASE_METHOD(HttpCoordinator,
                 "/metrics counts claims, completions and rejections as they happen", "[http]") {
    REQUIRE(http.port() > 0);
    Scraper scrape(http.port());

    auto res = scrape.get("/metrics");
    REQUIRE(res->status == 200);
    CHECK(res->get_header_value("Content-Type").find("version=0.0.4") != std::string::npos);
    CHECK(res->body.find("# TYPE aclaim_claims_total counter") != std::string::npos);
    CHECK(res->body.find("# TYPE aclaim_statement_duration_seconds histogram") !=
          std::string::npos);
    auto before = parse_samples(res->body);
    CHECK(before.at("aclaim_claims_total") == 0);
    CHECK(before.at("aclaim_completions_total") == 0);
    CHECK(before.at("aclaim_claim_duration_seconds_count") == 0);
    CHECK(before.at("aclaim_result_notifier_sent_total") == 0);

    store::AssignmentStore store(h.db.dsn());
    store.enqueue(1, some_jobs(2), clock.now());
    auto w = h.greeted("w1", 1);
    const auto job = w->claim_one();
    auto req = w->next_req();
    w->send(proto::Complete{req, job.job_id, job.generation, "review:w1"});
    w->expect<proto::Accepted>(req);
    // A completion at a generation that was never granted is refused as stale.
    const auto other = w->claim_one();
    req = w->next_req();
    w->send(proto::Complete{req, other.job_id, other.generation + 5, "review:w1"});
    w->expect<proto::Rejected>(req);

    const auto after = scrape.metrics();
    CHECK(after.at("aclaim_claims_total") == 2);
    CHECK(after.at("aclaim_jobs_assigned_total") == 2);
    CHECK(after.at("aclaim_completions_total") == 1);
    CHECK(after.at("aclaim_rejections_total{reason=\"stale_generation\"}") == 1);
    CHECK(after.at("aclaim_rejections_total{reason=\"lease_expired\"}") == 0);
    CHECK(after.at("aclaim_connected_workers") == 1);
    CHECK(after.at("aclaim_db_threads") == h.coordinator->options().db_pool.db_threads);
    CHECK(after.at("aclaim_requests_total") >= 5);
    // Authentication is exported in plaintext mode too, as zeros, so dashboards have one shape.
    CHECK(after.at("aclaim_auth_curve_enabled") == 0);
    for (const char* outcome : {"accepted", "refused", "failed"}) {
        CHECK(after.at(std::string("aclaim_auth_handshakes_total{outcome=\"") + outcome + "\"}") ==
              0);
    }
    CHECK(after.at("aclaim_auth_key_lookups_total") == 0);
    CHECK(after.at("aclaim_auth_sessions_revoked_total") == 0);
    CHECK(after.at("aclaim_errors_total{code=\"key_revoked\"}") == 0);
    CHECK(after.at("aclaim_claim_duration_seconds_count") == 2);
    CHECK(after.at("aclaim_claim_duration_seconds_bucket{le=\"+Inf\"}") == 2);
    CHECK(after.at("aclaim_claim_duration_seconds_sum") > 0);
    CHECK(after.at("aclaim_statement_duration_seconds_count{statement=\"claim\"}") == 2);
    CHECK(after.at("aclaim_statement_duration_seconds_count{statement=\"complete\"}") == 2);
    CHECK(after.at("aclaim_statement_duration_seconds_count{statement=\"renew\"}") == 0);

    // Buckets are cumulative: each is at least the one before, and +Inf is the count.
    double previous = 0;
    for (const auto bound : coordinator::Histogram::kBoundsUs) {
        char le[32];
        std::snprintf(le, sizeof le, "%g", static_cast<double>(bound) / 1e6);
        const auto v = after.at(
            std::string("aclaim_statement_duration_seconds_bucket{statement=\"claim\",le=\"") + le +
            "\"}");
        CHECK(v >= previous);
        previous = v;
    }
    CHECK(previous <= 2);

    // The reaper's statement is timed too; it runs every 20 ms in this harness.
    CHECK(eventually([&] {
        return scrape.metrics().at(
                   "aclaim_statement_duration_seconds_count{statement=\"reclaim\"}") > 0;
    }));

    // The accepted completion's organization is announced after its commit by the result
    // notifier's own thread: one notification (the refused completion announces nothing), in a
    // round that did not fail.
    CHECK(
        eventually([&] { return scrape.metrics().at("aclaim_result_notifier_sent_total") >= 1; }));
    const auto notified = scrape.metrics();
    CHECK(notified.at("aclaim_result_notifier_sent_total") == 1);
    CHECK(notified.at("aclaim_result_notifier_failed_rounds_total") == 0);
    http.stop();
}

TEST_CASE_METHOD(HttpCoordinator, "/healthz follows the router thread and /readyz the database",
                 "[http]") {
    Scraper scrape(http.port());
    CHECK(eventually([&] { return scrape.get("/healthz")->body == "ok\n"; }));
    CHECK(scrape.get("/healthz")->status == 200);
    auto ready = scrape.get("/readyz");
    CHECK(ready->status == 200);
    CHECK(ready->body.rfind("ready: writable primary on timeline 1, schema at version", 0) == 0);
    CHECK(scrape.get("/nothing")->status == 404);

    // A router whose last tick is older than the stall limit: the tick is what a stuck loop
    // would leave behind, written into metrics no running router thread touches.
    coordinator::Metrics stuck;
    const auto real_now = base::SystemClock().monotonic_now().time_since_epoch();
    stuck.router_tick_ns.store(
        (real_now - coordinator::HttpServer::kStallLimit - std::chrono::seconds(5)).count());
    coordinator::HttpServer stalled(http_options(h.coordinator->options(), h.db.dsn()), stuck);
    stalled.start();
    Scraper stalled_scrape(stalled.port());
    const auto stalled_health = stalled_scrape.get("/healthz");
    CHECK(stalled_health->status == 503);
    CHECK(stalled_health->body.rfind("router thread stalled: last ran ", 0) == 0);
    // The same metrics ticked just now are healthy again: the answer follows the tick.
    stuck.router_tick_ns.store(base::SystemClock().monotonic_now().time_since_epoch().count());
    CHECK(stalled_scrape.get("/healthz")->status == 200);

    // A database without the schema: reachable, not ready, and the answer says what to do.
    coordinator::HttpServer bare(http_options(h.coordinator->options(), server_dsn()),
                                 h.coordinator->metrics());
    bare.start();
    auto not_ready = Scraper(bare.port()).get("/readyz");
    CHECK(not_ready->status == 503);
    CHECK(not_ready->body.find("schema is at version 0") != std::string::npos);
    CHECK(not_ready->body.find("aclaimctl migrate") != std::string::npos);

    // No database at all: nothing listens on port 1.
    coordinator::HttpServer lost(
        http_options(h.coordinator->options(), "postgresql://127.0.0.1:1/nothing"),
        h.coordinator->metrics());
    lost.start();
    auto unreachable = Scraper(lost.port()).get("/readyz");
    CHECK(unreachable->status == 503);
    CHECK(unreachable->body.find("database unreachable") != std::string::npos);
}

TEST_CASE_METHOD(ManualCoordinator, "an HTTP address already taken is refused with its name",
                 "[http]") {
    coordinator::HttpServer first(http_options(h.coordinator->options(), h.db.dsn()),
                                  h.coordinator->metrics());
    first.start();
    auto o = h.coordinator->options();
    o.http.http_bind = first.address();
    coordinator::HttpServer second(o.http_endpoint(), h.coordinator->metrics());
    try {
        second.start();
        FAIL("a second server bound " << first.address());
    } catch (const std::runtime_error& e) {
        CHECK(std::string(e.what()).find(first.address()) != std::string::npos);
    }
}
