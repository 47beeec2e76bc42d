#include "coordinator/http/prometheus.hpp"

#include <cstdio>

namespace aclaim::coordinator {

namespace {

/// Builds the exposition text family by family.
class Writer {
  public:
    void family(std::string_view name, std::string_view type, std::string_view help) {
        out_ += "# HELP ";
        out_ += name;
        out_ += ' ';
        out_ += help;
        out_ += "\n# TYPE ";
        out_ += name;
        out_ += ' ';
        out_ += type;
        out_ += '\n';
    }

    void sample(std::string_view name, std::string_view labels, std::uint64_t value) {
        sample_text(name, labels, std::to_string(value));
    }

    void sample_signed(std::string_view name, std::string_view labels, std::int64_t value) {
        sample_text(name, labels, std::to_string(value));
    }

    void sample_seconds(std::string_view name, std::string_view labels, std::uint64_t us) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.6f", static_cast<double>(us) / 1e6);
        sample_text(name, labels, buf);
    }

    void counter(std::string_view name, std::string_view help, std::uint64_t value) {
        family(name, "counter", help);
        sample(name, "", value);
    }

    void gauge(std::string_view name, std::string_view help, std::int64_t value) {
        family(name, "gauge", help);
        sample_signed(name, "", value);
    }

    /// One histogram series; `labels` is empty or `key="value"` without braces.
    void histogram(std::string_view name, std::string_view labels, const Histogram& h) {
        const auto s = h.snapshot();
        const std::string bucket = std::string(name) + "_bucket";
        const std::string prefix = labels.empty() ? "" : std::string(labels) + ",";
        std::uint64_t cumulative = 0;
        for (std::size_t i = 0; i < Histogram::kBuckets; ++i) {
            cumulative += s.buckets[i];
            std::string le;
            if (i < Histogram::kBoundsUs.size()) {
                char buf[32];
                std::snprintf(buf, sizeof buf, "%g",
                              static_cast<double>(Histogram::kBoundsUs[i]) / 1e6);
                le = buf;
            } else {
                le = "+Inf";
            }
            std::string bucket_labels = prefix;
            bucket_labels += "le=\"";
            bucket_labels += le;
            bucket_labels += '"';
            sample(bucket, bucket_labels, cumulative);
        }
        sample_seconds(std::string(name) + "_sum", labels, s.sum_us);
        sample(std::string(name) + "_count", labels, cumulative);
    }

    std::string take() { return std::move(out_); }

  private:
    void sample_text(std::string_view name, std::string_view labels, const std::string& value) {
        out_ += name;
        if (!labels.empty()) {
            out_ += '{';
            out_ += labels;
            out_ += '}';
        }
        out_ += ' ';
        out_ += value;
        out_ += '\n';
    }

    std::string out_;
};

std::string label(std::string_view key, std::string_view value) {
    return std::string(key) + "=\"" + std::string(value) + "\"";
}

}  // namespace

std::string render_prometheus(const Metrics& m, const HttpOptions& o) {
    Writer w;
    w.counter("aclaim_requests_total", "Frames received on the ROUTER socket.", m.requests.load());
    w.counter("aclaim_claims_total", "CLAIMs answered with ASSIGNED.", m.claims.load());
    w.counter("aclaim_jobs_assigned_total", "Jobs handed out in ASSIGNED replies.",
              m.jobs_assigned.load());
    w.counter("aclaim_no_work_total", "CLAIMs answered with NO_WORK.", m.no_work.load());
    w.counter("aclaim_claims_parked_total", "Times a CLAIM was parked to wait for work.",
              m.parked.load());
    w.counter("aclaim_renewals_total", "RENEWs answered with LEASE.", m.renewals.load());
    w.counter("aclaim_completions_total", "COMPLETEs accepted, replays included.",
              m.completions.load());
    w.counter("aclaim_failures_total", "FAILs accepted.", m.failures.load());
    w.counter("aclaim_releases_total",
              "RELEASEs accepted, and assignments released because ASSIGNED was undeliverable.",
              m.releases.load());
    w.counter("aclaim_replayed_total", "Accepted transitions that had already been committed.",
              m.replayed.load());
    w.counter("aclaim_reclaims_total", "Expired leases the reaper took back.", m.reclaims.load());
    w.counter("aclaim_lease_revocations_total",
              "REVOKED sent: a renewal refused or a reclaim pushed to its holder.",
              m.revocations.load());
    w.counter("aclaim_replies_dropped_total", "Replies whose peer was gone or not reading.",
              m.replies_dropped.load());
    w.counter("aclaim_db_deadline_answers_total",
              "Requests answered by the coordinator itself because the database had not answered "
              "by the deadline.",
              m.db_deadline_answers.load());
    w.counter("aclaim_db_connections_abandoned_total",
              "Database connections cut because a statement on them passed its deadline.",
              m.db_connections_abandoned.load());

    w.family("aclaim_rejections_total", "counter",
             "RENEW, COMPLETE, FAIL and RELEASE refused, by reason.");
    for (std::size_t i = 0; i < m.rejections.size(); ++i) {
        w.sample("aclaim_rejections_total",
                 label("reason", common::to_string(static_cast<common::Rejection>(i))),
                 m.rejections[i].load());
    }
    w.family("aclaim_errors_total", "counter", "ERROR replies, by code.");
    for (std::size_t i = 0; i < m.errors.size(); ++i) {
        w.sample("aclaim_errors_total", label("code", common::proto::errors::kCounted[i]),
                 m.errors[i].load());
    }

    // Authentication is rendered in plaintext mode too (all zeros, and curve_enabled 0), so that
    // dashboards and alerts need no second shape.
    w.gauge("aclaim_auth_curve_enabled",
            "1 when workers must authenticate with a registered CURVE key, 0 in plaintext mode.",
            o.plaintext ? 0 : 1);
    w.family("aclaim_auth_handshakes_total", "counter",
             "CURVE handshakes answered by the ZAP handler, by outcome: accepted (a live "
             "registered key), refused (unknown or revoked key), failed (the key lookup failed).");
    w.sample("aclaim_auth_handshakes_total", label("outcome", "accepted"), m.auth.accepted.load());
    w.sample("aclaim_auth_handshakes_total", label("outcome", "refused"), m.auth.refused.load());
    w.sample("aclaim_auth_handshakes_total", label("outcome", "failed"), m.auth.failed.load());
    w.counter("aclaim_auth_key_lookups_total",
              "worker_keys queries: handshake cache misses and re-checks of open connections.",
              m.auth.lookups.load());
    w.counter("aclaim_auth_sessions_revoked_total",
              "Sessions cut off because their connection's key was revoked while it was open.",
              m.auth.sessions_revoked.load());

    w.gauge("aclaim_connected_workers", "Worker sessions currently open.",
            m.connected_sessions.load());
    w.gauge("aclaim_db_threads", "Database threads, one connection each.", o.db_threads);
    w.gauge("aclaim_db_queued_requests",
            "Requests waiting for a database thread, sampled every second.", m.db_queued.load());
    w.gauge("aclaim_db_in_flight_requests",
            "Requests handed to the database threads and not yet answered, sampled every second.",
            m.db_in_flight.load());

    w.family("aclaim_retention_pruned_jobs_total", "counter",
             "Finished jobs this coordinator's retention removed (with their results), by the "
             "state they had finished in.");
    for (std::size_t i = 0; i < Metrics::kPrunedStates.size(); ++i) {
        w.sample("aclaim_retention_pruned_jobs_total", label("state", Metrics::kPrunedStates[i]),
                 m.pruned_jobs[i].load());
    }
    w.counter("aclaim_retention_pruned_results_total",
              "job_results rows removed with their pruned jobs.", m.pruned_results.load());
    w.family("aclaim_retention_passes_total", "counter",
             "Retention passes: run (this coordinator held the retention lock) or idle (another "
             "coordinator held it).");
    w.sample("aclaim_retention_passes_total", label("outcome", "run"), m.retention_passes.load());
    w.sample("aclaim_retention_passes_total", label("outcome", "idle"),
             m.retention_passes_idle.load());
    w.counter("aclaim_event_partitions_created_total",
              "Monthly job_events partitions this coordinator created ahead of time.",
              m.partitions_created.load());
    w.family("aclaim_event_partitions", "gauge",
             "job_events partitions by state (archived and dropped ones went through aclaimctl "
             "retention archive), as of the last retention pass; -1 before it.");
    for (std::size_t i = 0; i < Metrics::kPartitionStates.size(); ++i) {
        w.sample_signed("aclaim_event_partitions", label("state", Metrics::kPartitionStates[i]),
                        m.partitions[i].load());
    }
    w.gauge("aclaim_event_partitions_cover_until_seconds",
            "End of the last attached job_events partition, seconds since the epoch: an event "
            "stamped later has no partition (alert well before).",
            m.partitions_cover_until_s.load());

    w.family("aclaim_claim_duration_seconds", "histogram",
             "A CLAIM from its hand-over to a database thread until its outcome is back on the "
             "router thread (queue wait, statement, commit), long-poll parking excluded.");
    w.histogram("aclaim_claim_duration_seconds", "", m.claim_latency);
    w.family("aclaim_claim_stage_duration_seconds", "histogram",
             "Where a granted CLAIM's time went: queue_wait (for a database thread), statement "
             "(up to the commit), commit (the WAL flush), reply (until ASSIGNED left).");
    for (std::size_t i = 0; i < Metrics::kClaimStages.size(); ++i) {
        w.histogram("aclaim_claim_stage_duration_seconds", label("stage", Metrics::kClaimStages[i]),
                    m.claim_stages[i]);
    }
    w.family("aclaim_statement_duration_seconds", "histogram",
             "One store call on a database thread or the reaper, by statement.");
    for (std::size_t i = 0; i < Metrics::kStatements.size(); ++i) {
        w.histogram("aclaim_statement_duration_seconds",
                    label("statement", Metrics::kStatements[i]), m.statement_latency[i]);
    }
    return w.take();
}

}  // namespace aclaim::coordinator
