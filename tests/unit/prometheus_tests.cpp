// The metrics exposition and its pieces, without a coordinator.

#include <catch2/catch.hpp>

#include "coordinator/http/host_port.hpp"
#include "coordinator/http/prometheus.hpp"
#include "coordinator/http/readiness.hpp"

using namespace aclaim;
using namespace aclaim::coordinator;
using namespace std::chrono_literals;

TEST_CASE("a histogram puts each observation in the first bucket that holds it", "[metrics]") {
    Histogram h;
    h.observe(0us);
    h.observe(100us);  // on a bound: belongs to it (le is "less or equal")
    h.observe(101us);
    h.observe(3ms);
    h.observe(10s);   // past the last bound
    h.observe(-5us);  // a clock step backwards counts as zero
    const auto s = h.snapshot();
    CHECK(s.count == 6);
    CHECK(s.buckets[0] == 3);
    CHECK(s.buckets[1] == 1);
    CHECK(s.buckets[5] == 1);  // 2.5 ms < 3 ms <= 5 ms
    CHECK(s.buckets[Histogram::kBuckets - 1] == 1);
    CHECK(s.sum_us == 100 + 101 + 3000 + 10'000'000);
}

TEST_CASE("the Prometheus text has one HELP and TYPE per family and cumulative buckets",
          "[metrics]") {
    Metrics m;
    m.claims = 7;
    m.count_rejection(common::Rejection::LeaseExpired);
    m.count_error("overloaded");
    m.connected_sessions = 3;
    m.claim_latency.observe(2ms);
    m.claim_latency.observe(40ms);
    m.pruned_jobs[2] = 4;
    m.partitions[2] = 3;
    CoordinatorOptions o;
    o.db_pool.db_threads = 5;
    const auto text = render_prometheus(m, o.http_endpoint());
    CHECK(text.find("# TYPE aclaim_claims_total counter\naclaim_claims_total 7\n") !=
          std::string::npos);
    CHECK(text.find("aclaim_rejections_total{reason=\"lease_expired\"} 1\n") != std::string::npos);
    CHECK(text.find("aclaim_rejections_total{reason=\"stale_generation\"} 0\n") !=
          std::string::npos);
    CHECK(text.find("aclaim_errors_total{code=\"overloaded\"} 1\n") != std::string::npos);
    CHECK(text.find("aclaim_connected_workers 3\n") != std::string::npos);
    CHECK(text.find("aclaim_db_threads 5\n") != std::string::npos);
    CHECK(text.find("aclaim_claim_duration_seconds_bucket{le=\"0.001\"} 0\n") != std::string::npos);
    CHECK(text.find("aclaim_claim_duration_seconds_bucket{le=\"0.0025\"} 1\n") !=
          std::string::npos);
    CHECK(text.find("aclaim_claim_duration_seconds_bucket{le=\"0.05\"} 2\n") != std::string::npos);
    CHECK(text.find("aclaim_claim_duration_seconds_bucket{le=\"+Inf\"} 2\n") != std::string::npos);
    CHECK(text.find("aclaim_claim_duration_seconds_sum 0.042000\n") != std::string::npos);
    CHECK(text.find("aclaim_claim_stage_duration_seconds_count{stage=\"commit\"} 0\n") !=
          std::string::npos);
    CHECK(text.find("aclaim_statement_duration_seconds_count{statement=\"reclaim\"} 0\n") !=
          std::string::npos);
    // Retention: bounded labels (four states, two outcomes, four partition states).
    CHECK(text.find("aclaim_retention_pruned_jobs_total{state=\"discarded\"} 4\n") !=
          std::string::npos);
    CHECK(text.find("aclaim_retention_pruned_jobs_total{state=\"completed\"} 0\n") !=
          std::string::npos);
    CHECK(text.find("aclaim_event_partitions{state=\"archived\"} 3\n") != std::string::npos);
    CHECK(text.find("aclaim_event_partitions{state=\"attached\"} -1\n") != std::string::npos);
    CHECK(text.find("aclaim_retention_passes_total{outcome=\"idle\"} 0\n") != std::string::npos);
    CHECK(text.find("aclaim_statement_duration_seconds_count{statement=\"prune\"} 0\n") !=
          std::string::npos);
    // Every family is declared once, before its samples.
    std::size_t types = 0, helps = 0;
    for (std::size_t at = text.find("# TYPE "); at != std::string::npos;
         at = text.find("# TYPE ", at + 1))
        ++types;
    for (std::size_t at = text.find("# HELP "); at != std::string::npos;
         at = text.find("# HELP ", at + 1))
        ++helps;
    CHECK(types == helps);
    CHECK(types == 34);
    CHECK(text.back() == '\n');
}

TEST_CASE("authentication counters are exported, as zeros in plaintext mode", "[metrics]") {
    Metrics m;
    CoordinatorOptions o;
    o.router.plaintext = true;
    auto text = render_prometheus(m, o.http_endpoint());
    CHECK(text.find("# TYPE aclaim_auth_handshakes_total counter\n") != std::string::npos);
    CHECK(text.find("aclaim_auth_curve_enabled 0\n") != std::string::npos);
    CHECK(text.find("aclaim_auth_handshakes_total{outcome=\"accepted\"} 0\n") != std::string::npos);
    CHECK(text.find("aclaim_auth_handshakes_total{outcome=\"refused\"} 0\n") != std::string::npos);
    CHECK(text.find("aclaim_auth_handshakes_total{outcome=\"failed\"} 0\n") != std::string::npos);
    CHECK(text.find("aclaim_auth_key_lookups_total 0\n") != std::string::npos);
    CHECK(text.find("aclaim_auth_sessions_revoked_total 0\n") != std::string::npos);

    o.router.plaintext = false;
    m.auth.accepted = 5;
    m.auth.refused = 3;
    m.auth.failed = 1;
    m.auth.lookups = 9;
    m.auth.sessions_revoked = 2;
    m.count_error("key_revoked");
    text = render_prometheus(m, o.http_endpoint());
    CHECK(text.find("aclaim_auth_curve_enabled 1\n") != std::string::npos);
    CHECK(text.find("aclaim_auth_handshakes_total{outcome=\"accepted\"} 5\n") != std::string::npos);
    CHECK(text.find("aclaim_auth_handshakes_total{outcome=\"refused\"} 3\n") != std::string::npos);
    CHECK(text.find("aclaim_auth_handshakes_total{outcome=\"failed\"} 1\n") != std::string::npos);
    CHECK(text.find("aclaim_auth_key_lookups_total 9\n") != std::string::npos);
    CHECK(text.find("aclaim_auth_sessions_revoked_total 2\n") != std::string::npos);
    CHECK(text.find("aclaim_errors_total{code=\"key_revoked\"} 1\n") != std::string::npos);
    CHECK(text.find("aclaim_errors_total{code=\"other\"} 0\n") != std::string::npos);
}

TEST_CASE("listening addresses as operators write them", "[metrics]") {
    const auto a = parse_host_port("127.0.0.1:9464");
    REQUIRE(a);
    CHECK(a->host == "127.0.0.1");
    CHECK(a->port == 9464);
    const auto v6 = parse_host_port("[::1]:0");
    REQUIRE(v6);
    CHECK(v6->host == "::1");
    CHECK(v6->port == 0);
    CHECK_FALSE(parse_host_port("9464"));
    CHECK_FALSE(parse_host_port(":9464"));
    CHECK_FALSE(parse_host_port("localhost:"));
    CHECK_FALSE(parse_host_port("localhost:70000"));
    CHECK_FALSE(parse_host_port("localhost:http"));
}

TEST_CASE("the readiness probe bounds its connection attempt in either DSN form", "[metrics]") {
    CHECK(with_connect_timeout("postgresql://u@h/db", 2) ==
          "postgresql://u@h/db?connect_timeout=2");
    CHECK(with_connect_timeout("postgres://h/db?sslmode=disable", 2) ==
          "postgres://h/db?sslmode=disable&connect_timeout=2");
    CHECK(with_connect_timeout("host=h dbname=db", 2) == "host=h dbname=db connect_timeout=2");
    CHECK(with_connect_timeout("host=h connect_timeout=9", 2) == "host=h connect_timeout=9");
}
