// report.md: what an operator reads after a canary, with the chart linked in.

#include <cmath>
#include <cstdio>
#include <map>
#include <string>

#include "drills/canary.d/report.hpp"

namespace aclaim::drills {

namespace {

std::string f1(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f", v);
    return buf;
}

std::string f2(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", v);
    return buf;
}

std::string by_reason(const std::map<std::string, std::int64_t>& m) {
    if (m.empty()) return "none";
    std::string out;
    for (const auto& [reason, n] : m) {
        out += (out.empty() ? "" : ", ") + reason + ": " + std::to_string(n);
    }
    return out;
}

std::int64_t sum(const std::map<std::string, std::int64_t>& m) {
    std::int64_t n = 0;
    for (const auto& [k, v] : m) n += v;
    return n;
}

std::string latency(const LatencySummary& s) {
    return f1(s.p50_ms) + " / " + f1(s.p90_ms) + " / " + f1(s.p99_ms) + " / " + f1(s.max_ms) +
           " ms (" + std::to_string(s.count) + " samples)";
}

/// Histogram percentiles are bucket upper bounds: "≤" says so.
std::string bound_ms(double ms) {
    return std::isfinite(ms) ? "≤ " + f1(ms) + " ms" : "> 5 s";
}

std::string coordinator(const CoordinatorTiming& t) {
    if (!t.available) return "not available";
    return bound_ms(t.statement_p50_ms) + " / " + bound_ms(t.statement_p99_ms) + "; " +
           bound_ms(t.service_p50_ms) + " / " + bound_ms(t.service_p99_ms) + " (" +
           std::to_string(static_cast<long long>(t.statements)) + " statements)";
}

std::string cell(const std::string& s) {
    std::string out;
    for (char c : s) {
        if (c == '|')
            out += "\\|";
        else if (c == '\n')
            out += ' ';
        else
            out += c;
    }
    return out;
}

}  // namespace

std::string report_markdown(const RunResult& r) {
    const auto& o = r.options;
    const auto& t = r.seen_total;
    std::string md;
    md += "# aclaim canary: " + r.verdict() + "\n\n";
    md += "> " + std::string(kNoGuarantee) + "\n\n";
    md += "Shape `" + std::string(to_string(o.shape)) + "` from " +
          std::to_string(o.start_pollers) + " to " + std::to_string(o.max_pollers) +
          " pollers over " + std::to_string(o.seconds) + " s; review " +
          std::to_string(o.review_ms) + " ms, claim wait " + std::to_string(o.claim_wait_ms) +
          " ms, lease " + std::to_string(o.lease_ms) + " ms, heartbeat " +
          std::to_string(o.heartbeat_ms) + " ms; coordinator with " + std::to_string(o.db_threads) +
          " DB threads; organization " + std::to_string(r.org) + "; " +
          (o.plaintext ? "plaintext (`--plaintext`): no encryption, HELLO names the organization"
                       : "CURVE: every connection encrypted, each poller with a key registered "
                         "for the organization") +
          ".";
    if (o.inject) {
        md += " A `" + std::string(to_string(o.inject->kind)) +
              "` violation was injected at second " + std::to_string(o.inject->second) +
              " with `--inject-violation`.";
    }
    md += "\n\nVerdict: **" + r.verdict() + "** (exit " + std::to_string(r.exit_code()) + ").\n\n";
    md += "![pollers, claims per second and claim p99 latency over time](chart.svg)\n\n";

    md += "## Totals\n\n| measure | value |\n|---|---|\n";
    md += "| seconds run | " + f1(r.seconds_run) + " |\n";
    md += "| jobs claimed by pollers | " + std::to_string(t.jobs_assigned) + " (" +
          f1(r.seconds_run > 0 ? static_cast<double>(t.jobs_assigned) / r.seconds_run : 0) +
          "/s) |\n";
    md += "| claim round trip p50 / p90 / p99 / max (worker side) | " +
          latency(r.claim_latency_total) + " |\n";
    md += "| direct claim probe p50 / p90 / p99 / max (statement + commit) | " +
          latency(r.probe_latency_total) + "; outcomes " + by_reason(r.probe_total.outcomes) +
          " |\n";
    md += "| coordinator claim statement p50 / p99; CLAIM service p50 / p99 (from /metrics) | " +
          coordinator(r.coordinator_total) + " |\n";
    md += "| NO_WORK replies | " + std::to_string(t.no_work) + " (" +
          by_reason(t.no_work_by_reason) + ") |\n";
    md +=
        "| claims ended by ERROR or a lost connection | " + std::to_string(t.claim_errors) + " |\n";
    md += "| renewals | " + std::to_string(t.renewals) + " |\n";
    md += "| completions accepted | " + std::to_string(t.completions) + " (replayed " +
          std::to_string(t.replayed) + ") |\n";
    md += "| completions rejected | " + std::to_string(sum(t.rejections_by_reason)) + " (" +
          by_reason(t.rejections_by_reason) + ") |\n";
    md += "| jobs revoked | " + std::to_string(sum(t.revocations_by_reason)) + " (" +
          by_reason(t.revocations_by_reason) + ") |\n";
    const auto& d = r.facts.displacement;
    md += "| displacement mean / p50 / p99 / max (bound at " + std::to_string(r.facts.max_pollers) +
          " pollers: " + std::to_string(r.bounds.displacement_bound(r.facts.max_pollers)) + ") | " +
          f2(d.mean) + " / " + std::to_string(d.p50) + " / " + std::to_string(d.p99) + " / " +
          std::to_string(d.max) + " over " + std::to_string(d.claims) + " claims |\n";
    md += "| claims not in strict order | " + f1(100 * d.displaced_share) + "% |\n";
    md += "| jobs returned to pending | " + std::to_string(r.facts.audit.returned) + " |\n";
    md += "| duplicate claims | " + std::to_string(r.facts.duplicate_assignments) +
          " worker side, " + std::to_string(r.facts.audit.duplicate_claims) +
          " in the audit log |\n";
    md += "| stale acceptances | " + std::to_string(r.facts.audit.stale_acceptances) + " |\n";
    md += "| lock waits seen (claim / other), in " + std::to_string(r.locks_total.samples) +
          " snapshots | " + std::to_string(r.locks_total.claim_waits) + " / " +
          std::to_string(r.locks_total.other_waits) + "; longest claim wait " +
          f1(r.locks_total.claim_wait_max_ms) + " ms; by lock type " +
          by_reason(r.locks_total.by_lock_type) + " |\n";
    md += "| jobs enqueued to keep the backlog | " + std::to_string(r.enqueued_total) + " |\n";
    md += "| invariant check (organization " + std::to_string(r.org) + ") | " +
          (r.facts.check.ok() ? std::string("OK")
                              : std::to_string(r.facts.check.violations.size()) + " violations") +
          ", " + std::to_string(r.facts.check.accepted_completions) + " accepted completions |\n\n";

    md +=
        "## Contract\n\nJudged on every interval and again on the whole run "
        "(drills/canary.d/contract.md):\n\n";
    for (const auto& rule : contract_rules(r.bounds)) {
        md += "- `" + rule.name + "`: " + rule.text + "\n";
    }
    md += "\n## Violations and back-off\n\n";
    if (r.violations.empty()) {
        md += "None.\n\n";
    } else {
        md +=
            "| second | pollers | rule | evidence | injected | backed off to |\n"
            "|---|---|---|---|---|---|\n";
        for (const auto& v : r.violations) {
            md += "| " + (v.second < 0 ? std::string("whole run") : std::to_string(v.second)) +
                  " | " + (v.second < 0 ? "" : std::to_string(v.level)) + " | `" + v.rule + "` | " +
                  cell(v.evidence) + " | " + (v.injected ? "yes" : "no") + " | " +
                  (v.second < 0 ? "" : std::to_string(v.backed_off_to)) + " |\n";
        }
        md += "\n";
    }
    if (!r.problems.empty()) {
        md += "## Problems\n\n";
        for (const auto& p : r.problems) md += "- " + cell(p) + "\n";
        md += "\n";
    }

    md +=
        "## Per interval\n\n"
        "| s | pollers | claims/s | claim p50 / p99 / max ms | coordinator statement p99 | "
        "NO_WORK | renewals | completions | displacement p99 / max (bound) | claim lock waits | "
        "probe ms | backlog min | contract |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    for (const auto& in : r.intervals) {
        std::string verdict = "ok";
        if (!in.violations.empty()) {
            verdict.clear();
            for (const auto& v : in.violations) {
                verdict +=
                    (verdict.empty() ? "" : ", ") + v.rule + (v.injected ? " (injected)" : "");
            }
            verdict += " → " + std::to_string(in.violations.front().backed_off_to);
        }
        md += "| " + std::to_string(in.second) + " | " + std::to_string(in.pollers) + " | " +
              std::to_string(in.seen.jobs_assigned) + " | " + f1(in.claim_latency.p50_ms) + " / " +
              f1(in.claim_latency.p99_ms) + " / " + f1(in.claim_latency.max_ms) + " | " +
              (in.coordinator.available ? bound_ms(in.coordinator.statement_p99_ms) : "n/a") +
              " | " + std::to_string(in.seen.no_work) + " | " + std::to_string(in.seen.renewals) +
              " | " + std::to_string(in.seen.completions) + " | " +
              std::to_string(in.displacement.p99) + " / " + std::to_string(in.displacement.max) +
              " (" + std::to_string(in.displacement_bound) + ") | " +
              std::to_string(in.locks.claim_waits) + " | " + f1(in.probe_latency.max_ms) + " | " +
              std::to_string(in.backlog.pending_min) + " | " + verdict + " |\n";
    }
    md +=
        "\n## How to read this\n\n"
        "- **claim round trip**: from a poller sending CLAIM (one job, long-poll " +
        std::to_string(o.claim_wait_ms) +
        " ms) to ASSIGNED, measured by the poller, so it includes ZeroMQ, the coordinator's "
        "queue and the statement.\n"
        "- **coordinator claim statement**: the difference between two scrapes of the "
        "coordinator's `/metrics` (`aclaim_statement_duration_seconds{statement=\"claim\"}`, one "
        "store call on a DB thread; `aclaim_claim_duration_seconds`, a CLAIM from hand-over to a "
        "DB thread until its answer, parking excluded); percentiles are bucket upper bounds.\n"
        "- **direct claim probe**: the same claim, as the coordinator's store runs it, on a "
        "connection of the canary's own, once per second, timing statement plus commit without "
        "the coordinator in between. The probe is a claimer too, which is why the bound counts "
        "it.\n"
        "- **displacement**: for each claim, the better-ranked jobs still pending in audit-log "
        "order when it was taken. Per interval it covers the claims settled by that second's "
        "pass over the log (taken up to a second earlier); the totals are recomputed from the "
        "complete log after the run.\n"
        "- **lock waits**: sessions with `wait_event_type = 'Lock'` in `pg_stat_activity`, joined "
        "to their ungranted `pg_locks` row, sampled every 100 ms; a claim is recognised by its "
        "statement text. Waits shorter than the sampling period can go unseen.\n";
    return md;
}

}  // namespace aclaim::drills
