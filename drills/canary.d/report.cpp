#include "drills/canary.d/report.hpp"

#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace aclaim::drills {

namespace {

// Keys stay in the order written, so report.json reads top-down like report.md.
using json = nlohmann::ordered_json;

json to_json(const LatencySummary& s) {
    return {{"count", s.count},
            {"p50", s.p50_ms},
            {"p90", s.p90_ms},
            {"p99", s.p99_ms},
            {"max", s.max_ms}};
}

json to_json(const DisplacementSummary& d) {
    return {{"claims", d.claims}, {"mean", d.mean}, {"p50", d.p50},
            {"p99", d.p99},       {"max", d.max},   {"displaced_share", d.displaced_share}};
}

json to_json(const LockSlice& l) {
    return {{"samples", l.samples},
            {"waiting_max", l.waiting_max},
            {"claim_waits", l.claim_waits},
            {"other_waits", l.other_waits},
            {"claim_wait_max_ms", l.claim_wait_max_ms},
            {"by_lock_type", l.by_lock_type}};
}

/// A bucket bound of +Inf has no JSON number: it is written as null.
json ms_or_null(double ms) {
    return std::isfinite(ms) ? json(ms) : json(nullptr);
}

json to_json(const CoordinatorTiming& t) {
    if (!t.available) return nullptr;
    return {{"claim_statements", t.statements},
            {"statement_p50_ms", ms_or_null(t.statement_p50_ms)},
            {"statement_p99_ms", ms_or_null(t.statement_p99_ms)},
            {"service_p50_ms", ms_or_null(t.service_p50_ms)},
            {"service_p99_ms", ms_or_null(t.service_p99_ms)},
            {"note", "upper bounds of the coordinator's histogram buckets"}};
}

json to_json(const Violation& v) {
    json j{{"rule", v.rule}, {"evidence", v.evidence}, {"injected", v.injected}};
    if (v.second >= 0) {
        j["second"] = v.second;
        j["level"] = v.level;
        j["backed_off_to"] = v.backed_off_to;
    } else {
        j["second"] = nullptr;
        j["scope"] = "whole run";
    }
    return j;
}

/// The counters pollers report, shared by intervals and totals.
void put_seen(json& j, const PollerCounts& c, double seconds) {
    j["claims"] = c.jobs_assigned;
    j["claims_per_s"] = seconds > 0 ? static_cast<double>(c.jobs_assigned) / seconds : 0.0;
    j["no_work"] = c.no_work;
    j["no_work_by_reason"] = c.no_work_by_reason;
    j["claim_errors"] = c.claim_errors;
    j["renewals"] = c.renewals;
    j["completions"] = c.completions;
    j["replayed"] = c.replayed;
    j["rejections_by_reason"] = c.rejections_by_reason;
    j["revocations_by_reason"] = c.revocations_by_reason;
}

std::string iso_time(base::Micros us) {
    const std::time_t t = static_cast<std::time_t>(us / 1'000'000);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

void write_file(const std::filesystem::path& path, const std::string& text) {
    std::ofstream out(path, std::ios::trunc);
    out << text;
    if (!out.flush()) throw std::runtime_error("cannot write " + path.string());
}

}  // namespace

json report_json(const RunResult& r) {
    const auto& o = r.options;
    json settings{{"shape", to_string(o.shape)},
                  {"seconds", o.seconds},
                  {"start_pollers", o.start_pollers},
                  {"max_pollers", o.max_pollers},
                  {"review_ms", o.review_ms},
                  {"claim_wait_ms", o.claim_wait_ms},
                  {"lease_ms", o.lease_ms},
                  {"heartbeat_ms", o.heartbeat_ms},
                  {"db_threads", o.db_threads},
                  {"coalesce", o.coalesce},
                  {"curve", !o.plaintext},
                  {"org", r.org},
                  {"endpoint", r.endpoint},
                  {"started_at", iso_time(r.started_at_us)},
                  {"inject_violation", o.inject ? json(std::string(to_string(o.inject->kind)) +
                                                       "@" + std::to_string(o.inject->second))
                                                : json(nullptr)}};
    json rules = json::array();
    for (const auto& rule : contract_rules(r.bounds)) {
        rules.push_back({{"name", rule.name}, {"text", rule.text}});
    }
    json contract{{"claimers", r.bounds.claimers()},
                  {"db_threads", r.bounds.db_threads},
                  {"coalesce", r.bounds.coalesce},
                  {"max_pollers_in_force", r.facts.max_pollers},
                  {"displacement_bound_at_max", r.bounds.displacement_bound(r.facts.max_pollers)},
                  {"rules", rules}};

    json intervals = json::array();
    for (const auto& in : r.intervals) {
        json j{{"second", in.second},
               {"pollers", in.pollers},
               {"displacement_bound", in.displacement_bound}};
        put_seen(j, in.seen, 1.0);
        j["claim_latency_ms"] = to_json(in.claim_latency);
        j["duplicate_claims"] = {{"worker_side", in.seen.duplicate_assignments},
                                 {"audit_log", in.audit.duplicate_claims}};
        j["stale_acceptances"] = in.audit.stale_acceptances;
        j["displacement"] = to_json(in.displacement);
        j["returned_to_pending"] = in.audit.returned;
        j["lock_waits"] = to_json(in.locks);
        j["probe"] = {{"claim_ms", to_json(in.probe_latency)}, {"outcomes", in.probe.outcomes}};
        j["coordinator_claim_timing"] = to_json(in.coordinator);
        j["backlog"] = {{"enqueued", in.backlog.enqueued}, {"pending_min", in.backlog.pending_min}};
        j["injected"] = in.injected ? json(std::string(to_string(*in.injected))) : json(nullptr);
        j["violations"] = json::array();
        for (const auto& v : in.violations) j["violations"].push_back(to_json(v));
        intervals.push_back(std::move(j));
    }

    json totals{{"seconds_run", r.seconds_run}};
    put_seen(totals, r.seen_total, r.seconds_run);
    totals["claim_latency_ms"] = to_json(r.claim_latency_total);
    totals["duplicate_claims"] = {{"worker_side", r.facts.duplicate_assignments},
                                  {"audit_log", r.facts.audit.duplicate_claims}};
    totals["stale_acceptances"] = r.facts.audit.stale_acceptances;
    totals["displacement"] = to_json(r.facts.displacement);
    totals["returned_to_pending"] = r.facts.audit.returned;
    totals["lock_waits"] = to_json(r.locks_total);
    totals["probe"] = {{"claim_ms", to_json(r.probe_latency_total)},
                       {"outcomes", r.probe_total.outcomes}};
    totals["coordinator_claim_timing"] = to_json(r.coordinator_total);
    totals["enqueued"] = r.enqueued_total;

    const auto& c = r.facts.check;
    json check{{"ok", c.ok()},
               {"jobs", c.jobs},
               {"events", c.events},
               {"states", c.states},
               {"accepted_completions", c.accepted_completions},
               {"rejections", c.rejections},
               {"reclaims", c.reclaims},
               {"violations", json::array()}};
    for (const auto& v : c.violations) {
        check["violations"].push_back({{"invariant", ops::to_string(v.invariant)},
                                       {"job_id", v.job_id},
                                       {"evidence", v.evidence}});
    }
    json violations = json::array();
    for (const auto& v : r.violations) violations.push_back(to_json(v));
    return {{"report", "aclaim canary"},
            {"no_throughput_guarantee", kNoGuarantee},
            {"verdict", r.verdict()},
            {"exit_code", r.exit_code()},
            {"settings", settings},
            {"contract", contract},
            {"intervals", intervals},
            {"totals", totals},
            {"final_check", check},
            {"violations", violations},
            {"problems", r.problems},
            {"interrupted", r.interrupted},
            {"coordinator_exit", r.coordinator_exit}};
}

void write_report(const RunResult& run, const std::string& dir) {
    write_file(dir + "/report.json", report_json(run).dump(2) + "\n");
    write_file(dir + "/chart.svg", chart_svg(run));
    write_file(dir + "/report.md", report_markdown(run));
}

std::string progress_line(const RunResult& r, const Interval& in) {
    char buf[256];
    std::snprintf(
        buf, sizeof buf,
        "[%3d/%ds] pollers %2d  claims/s %5lld  claim p99 %7.1f ms  no_work %4lld  "
        "displacement p99 %lld/%lld  claim lock waits %lld  %s",
        in.second + 1, r.options.seconds, in.pollers, static_cast<long long>(in.seen.jobs_assigned),
        in.claim_latency.p99_ms, static_cast<long long>(in.seen.no_work),
        static_cast<long long>(in.displacement.p99), static_cast<long long>(in.displacement_bound),
        static_cast<long long>(in.locks.claim_waits), in.violations.empty() ? "ok" : "VIOLATION");
    std::string line = buf;
    for (const auto& v : in.violations) {
        line += " [" + v.rule + (v.injected ? ", injected" : "") + "; backing off to " +
                std::to_string(v.backed_off_to) + "]";
    }
    return line;
}

}  // namespace aclaim::drills
