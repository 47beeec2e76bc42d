#include "drills/canary.d/options.hpp"

#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdlib>
#include <stdexcept>

#include "common/proto/version.hpp"

namespace aclaim::drills {

namespace {

void require(bool ok, const std::string& what) {
    if (!ok) throw std::invalid_argument(what);
}

}  // namespace

std::string_view to_string(InjectedViolation::Kind kind) {
    return kind == InjectedViolation::Kind::Displacement ? "displacement" : "duplicate";
}

std::optional<InjectedViolation> parse_injected_violation(std::string_view text) {
    const auto at = text.find('@');
    if (at == std::string_view::npos) return std::nullopt;
    InjectedViolation v;
    const auto kind = text.substr(0, at);
    if (kind == "displacement") {
        v.kind = InjectedViolation::Kind::Displacement;
    } else if (kind == "duplicate") {
        v.kind = InjectedViolation::Kind::Duplicate;
    } else {
        return std::nullopt;
    }
    const auto number = text.substr(at + 1);
    const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), v.second);
    if (ec != std::errc{} || end != number.data() + number.size() || v.second < 0) {
        return std::nullopt;
    }
    return v;
}

void CanaryOptions::validate() const {
    require(!dsn.empty(), "--dsn (ACLAIM_CANARY_DSN) is required");
    require(!out.empty(), "--out must name a folder");
    require(seconds >= 2 && seconds <= 3600, "--seconds must be 2..3600");
    require(start_pollers >= 1, "--start-pollers must be at least 1");
    require(max_pollers >= start_pollers && max_pollers <= 64,
            "--max-pollers must be --start-pollers..64");
    require(review_ms >= 0 && review_ms <= 60000, "--review-ms must be 0..60000");
    require(claim_wait_ms >= 0 && claim_wait_ms <= 60000, "--claim-wait-ms must be 0..60000");
    require(lease_ms >= 100, "--lease-ms must be at least 100");
    require(heartbeat_ms >= 0 && heartbeat_ms < lease_ms,
            "--heartbeat-ms must be shorter than the lease");
    require(db_threads >= 1 && db_threads <= 64, "--db-threads must be 1..64");
    require(org >= 0, "--org must not be negative");
    require(!inject || inject->second < seconds,
            "--inject-violation must name a second inside the run");
}

CanaryOptions parse_canary_options(int argc, char** argv) {
    CanaryOptions o;
    CLI::App app{
        "aclaim-canary: drives synthetic pollers through a real aclaim-coordinator against a real "
        "PostgreSQL with a declared load shape, checks the assignment contract every second, "
        "backs off when it is violated and writes a report. It measures behaviour; it makes no "
        "throughput guarantee."};
    app.set_version_flag("--version", proto::version_line("aclaim-canary"));
    app.add_option("--dsn", o.dsn, "PostgreSQL connection string")->envname("ACLAIM_CANARY_DSN");
    app.add_option("--coordinator", o.coordinator,
                   "aclaim-coordinator binary (default: next to this one)");
    app.add_option("--out", o.out, "Report folder")->required();
    app.add_option_function<std::string>(
           "--shape", [&o](const std::string& s) { o.shape = *parse_shape(s); },
           "Load shape: constant, ramp, step or spike")
        ->check(CLI::IsMember({"constant", "ramp", "step", "spike"}))
        ->default_str("ramp");
    app.add_option("--seconds", o.seconds, "Length of the run, one interval per second")
        ->capture_default_str();
    app.add_option("--start-pollers", o.start_pollers, "Pollers at the start of the shape")
        ->capture_default_str();
    app.add_option("--queues", o.queues,
                   "Queues the jobs are dealt over round robin; every poller serves them all")
        ->check(CLI::Range(1, 20))
        ->capture_default_str();
    app.add_option("--max-pollers", o.max_pollers, "Pollers at the top of the shape")
        ->capture_default_str();
    app.add_option("--review-ms", o.review_ms, "How long each job is held before completing")
        ->capture_default_str();
    app.add_option("--claim-wait-ms", o.claim_wait_ms, "Long-poll budget of each CLAIM")
        ->capture_default_str();
    app.add_option("--lease-ms", o.lease_ms, "Lease granted by the coordinator")
        ->capture_default_str();
    app.add_option("--heartbeat-ms", o.heartbeat_ms,
                   "Renewal interval asked of workers; 0 means a third of the lease")
        ->capture_default_str();
    app.add_option("--db-threads", o.db_threads, "The coordinator's database threads")
        ->capture_default_str();
    app.add_option_function<std::string>(
           "--coalesce", [&o](const std::string& v) { o.coalesce = v == "on"; },
           "Whether the coordinator coalesces queued claims: on or off")
        ->check(CLI::IsMember({"on", "off"}))
        ->default_str("on");
    app.add_option("--org", o.org, "Organization to work in (0: a fresh one)")
        ->capture_default_str();
    app.add_flag("--plaintext", o.plaintext,
                 "No CURVE: the coordinator trusts HELLO's organization (to measure without "
                 "encryption); by default every connection is CURVE with a registered key per "
                 "poller")
        ->envname("ACLAIM_DRILL_PLAINTEXT");
    app.add_option("--coordinator-log-level", o.coordinator_log_level,
                   "Log level of the coordinator's log file")
        ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}))
        ->capture_default_str();
    app.add_option_function<std::string>(
        "--inject-violation",
        [&o](const std::string& s) {
            o.inject = parse_injected_violation(s);
            if (!o.inject) {
                throw CLI::ValidationError("--inject-violation",
                                           "expected displacement@SECOND or duplicate@SECOND");
            }
        },
        "Make the contract checker see a violation at a second (displacement@S, duplicate@S), "
        "to rehearse the back-off");
    try {
        app.parse(argc, argv);
        o.validate();
    } catch (const CLI::ParseError& e) {
        std::exit(app.exit(e));
    } catch (const std::invalid_argument& e) {
        std::fprintf(stderr, "aclaim-canary: %s\n", e.what());
        std::exit(2);
    }
    return o;
}

}  // namespace aclaim::drills
