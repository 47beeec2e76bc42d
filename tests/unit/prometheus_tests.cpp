// The metrics exposition and its pieces, without a coordinator.

#include <unistd.h>

#include <array>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <string_view>

#include "common/base/host_port.hpp"
#include "coordinator/http/prometheus.hpp"
#include "coordinator/http/readiness.hpp"

using namespace aclaim;
using namespace aclaim::coordinator;
using namespace std::chrono_literals;

namespace {

/// Each of `expected` stands somewhere in the exposition `text` (each ends with its newline, so
/// a value cannot match the start of a longer one).
void check_lines(const std::string& text, std::initializer_list<std::string_view> expected) {
    for (const auto line : expected) {
        INFO(line);
        CHECK(text.find(line) != std::string::npos);
    }
}

/// How many lines of `text` begin with `prefix`.
std::size_t lines_starting(const std::string& text, std::string_view prefix) {
    std::size_t n = text.compare(0, prefix.size(), prefix) == 0 ? 1 : 0;
    const std::string at_line = "\n" + std::string(prefix);
    for (auto at = text.find(at_line); at != std::string::npos; at = text.find(at_line, at + 1)) {
        ++n;
    }
    return n;
}

}  // namespace

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
    m.count_rejection(store::Rejection::LeaseExpired);
    m.count_error("overloaded");
    m.connected_sessions = 3;
    m.claim_latency.observe(2ms);
    m.claim_latency.observe(40ms);
    m.pruned_jobs[Metrics::PrunedState::Discarded] = 4;
    m.partitions[Metrics::PartitionState::Archived] = 3;
    CoordinatorOptions o;
    o.db_pool.db_threads = 5;
    const auto text = render_prometheus(m, o.http_endpoint());
    check_lines(text,
                {"# TYPE aclaim_claims_total counter\naclaim_claims_total 7\n",
                 "aclaim_rejections_total{reason=\"lease_expired\"} 1\n",
                 "aclaim_rejections_total{reason=\"stale_generation\"} 0\n",
                 "aclaim_errors_total{code=\"overloaded\"} 1\n", "aclaim_connected_workers 3\n",
                 "aclaim_db_threads 5\n", "aclaim_claim_duration_seconds_bucket{le=\"0.001\"} 0\n",
                 "aclaim_claim_duration_seconds_bucket{le=\"0.0025\"} 1\n",
                 "aclaim_claim_duration_seconds_bucket{le=\"0.05\"} 2\n",
                 "aclaim_claim_duration_seconds_bucket{le=\"+Inf\"} 2\n",
                 "aclaim_claim_duration_seconds_sum 0.042000\n",
                 "aclaim_claim_stage_duration_seconds_count{stage=\"commit\"} 0\n",
                 "aclaim_statement_duration_seconds_count{statement=\"reclaim\"} 0\n"});
    // Retention: bounded labels (four states, two outcomes, four partition states).
    check_lines(text, {"aclaim_retention_pruned_jobs_total{state=\"discarded\"} 4\n",
                       "aclaim_retention_pruned_jobs_total{state=\"completed\"} 0\n",
                       "aclaim_event_partitions{state=\"archived\"} 3\n",
                       "aclaim_event_partitions{state=\"attached\"} -1\n",
                       "aclaim_retention_passes_total{outcome=\"idle\"} 0\n",
                       "aclaim_statement_duration_seconds_count{statement=\"prune\"} 0\n"});
    // The scheduler's one counter, unlabelled.
    check_lines(text, {"aclaim_schedule_jobs_enqueued_total 0\n"});
    // Parked jobs (protocol 1.6): PARKs, expired parks and the HTTP callbacks, unlabelled.
    check_lines(text, {"aclaim_jobs_parked_total 0\n", "aclaim_parks_expired_total 0\n",
                       "aclaim_park_callbacks_accepted_total 0\n",
                       "aclaim_park_callbacks_refused_total 0\n"});
    // Notifications dropped by the listener, by channel (three), and the revoke check.
    check_lines(text, {"aclaim_forged_notifications_total{channel=\"aclaim_revoke\"} 0\n",
                       "aclaim_forged_notifications_total{channel=\"aclaim_jobs\"} 0\n",
                       "aclaim_forged_notifications_total{channel=\"aclaim_schedule\"} 0\n",
                       "aclaim_revoke_notifications_verified_total 0\n",
                       "aclaim_revoke_check_duration_seconds_count 0\n"});
    // Refusals at the per-tenant limits, by limit.
    check_lines(text, {"aclaim_tenant_limit_refusals_total{limit=\"sessions_per_key\"} 0\n",
                       "aclaim_tenant_limit_refusals_total{limit=\"fd_reserve\"} 0\n"});
    // Parked claims now, and the listener's starts.
    check_lines(text, {"aclaim_claims_waiting 0\n", "aclaim_listener_starts_total 0\n"});
    // Every family is declared once, before its samples.
    const auto types = lines_starting(text, "# TYPE ");
    CHECK(types == lines_starting(text, "# HELP "));
    CHECK(types == 52);
    CHECK(text.back() == '\n');
}

TEST_CASE("authentication counters are exported, as zeros in plaintext mode", "[metrics]") {
    Metrics m;
    CoordinatorOptions o;
    o.router.plaintext = true;
    auto text = render_prometheus(m, o.http_endpoint());
    check_lines(text,
                {"# TYPE aclaim_auth_handshakes_total counter\n", "aclaim_auth_curve_enabled 0\n",
                 "aclaim_auth_handshakes_total{outcome=\"accepted\"} 0\n",
                 "aclaim_auth_handshakes_total{outcome=\"refused\"} 0\n",
                 "aclaim_auth_handshakes_total{outcome=\"failed\"} 0\n",
                 "aclaim_auth_key_lookups_total 0\n", "aclaim_auth_sessions_revoked_total 0\n"});

    o.router.plaintext = false;
    m.auth.accepted = 5;
    m.auth.refused = 3;
    m.auth.failed = 1;
    m.auth.lookups = 9;
    m.auth.sessions_revoked = 2;
    m.count_error("key_revoked");
    text = render_prometheus(m, o.http_endpoint());
    check_lines(
        text,
        {"aclaim_auth_curve_enabled 1\n", "aclaim_auth_handshakes_total{outcome=\"accepted\"} 5\n",
         "aclaim_auth_handshakes_total{outcome=\"refused\"} 3\n",
         "aclaim_auth_handshakes_total{outcome=\"failed\"} 1\n",
         "aclaim_auth_key_lookups_total 9\n", "aclaim_auth_sessions_revoked_total 2\n",
         "aclaim_errors_total{code=\"key_revoked\"} 1\n",
         "aclaim_errors_total{code=\"other\"} 0\n"});
}

TEST_CASE("the result notifier's counters are families of their own", "[metrics]") {
    Metrics m;
    m.results.sent.fetch_add(3);
    m.results.failed_rounds.fetch_add(1);
    const auto text = render_prometheus(m, CoordinatorOptions().http_endpoint());
    check_lines(text, {"# TYPE aclaim_result_notifier_sent_total counter\n"
                       "aclaim_result_notifier_sent_total 3\n",
                       "# TYPE aclaim_result_notifier_failed_rounds_total counter\n"
                       "aclaim_result_notifier_failed_rounds_total 1\n"});
}

TEST_CASE("promtool finds nothing to lint in the exposition", "[metrics][promtool]") {
    // promtool is Prometheus' own checker (Debian: prometheus); compose/dev deps installs it.
    // A missing promtool fails the test rather than passing it unlinted.
    INFO("promtool is not installed (compose/dev deps installs the prometheus package)");
    REQUIRE(std::system("command -v promtool >/dev/null 2>&1") == 0);
    Metrics m;
    m.claims = 2;
    m.count_rejection(store::Rejection::StaleGeneration);
    m.claim_latency.observe(3ms);
    m.statement_latency[Metrics::Statement::Claim].observe(700us);
    const std::string path = "/tmp/aclaim-promtool-" + std::to_string(::getpid()) + ".prom";
    {
        std::ofstream out(path);
        out << render_prometheus(m, CoordinatorOptions().http_endpoint());
    }
    const std::string command = "promtool check metrics < " + path + " 2>&1";
    std::string report;
    FILE* pipe = ::popen(command.c_str(), "r");
    REQUIRE(pipe != nullptr);
    std::array<char, 256> buf{};
    while (std::fgets(buf.data(), buf.size(), pipe) != nullptr) report += buf.data();
    const int status = ::pclose(pipe);
    std::remove(path.c_str());
    INFO(report);
    CHECK(status == 0);
    CHECK(report.empty());
}

TEST_CASE("listening addresses as operators write them", "[metrics]") {
    const auto a = base::parse_host_port("127.0.0.1:9464");
    REQUIRE(a);
    CHECK(a->host == "127.0.0.1");
    CHECK(a->port == 9464);
    const auto v6 = base::parse_host_port("[::1]:0");
    REQUIRE(v6);
    CHECK(v6->host == "::1");
    CHECK(v6->port == 0);
    CHECK_FALSE(base::parse_host_port("9464"));
    CHECK_FALSE(base::parse_host_port(":9464"));
    CHECK_FALSE(base::parse_host_port("localhost:"));
    CHECK_FALSE(base::parse_host_port("localhost:70000"));
    CHECK_FALSE(base::parse_host_port("localhost:http"));
}

TEST_CASE("the readiness probe bounds its connection attempt in either DSN form", "[metrics]") {
    CHECK(with_connect_timeout("postgresql://u@h/db", 2) ==
          "postgresql://u@h/db?connect_timeout=2");
    CHECK(with_connect_timeout("postgres://h/db?sslmode=disable", 2) ==
          "postgres://h/db?sslmode=disable&connect_timeout=2");
    CHECK(with_connect_timeout("host=h dbname=db", 2) == "host=h dbname=db connect_timeout=2");
    CHECK(with_connect_timeout("host=h connect_timeout=9", 2) == "host=h connect_timeout=9");
}
