#include "coordinator/options.hpp"

#include <CLI/CLI.hpp>
#include <cctype>
#include <fstream>
#include <stdexcept>

#include "common/base/cli_flags.hpp"
#include "common/base/host_port.hpp"
#include "common/store/conninfo.hpp"

namespace aclaim::coordinator {

namespace {

void require(bool ok, const std::string& what) {
    if (!ok) throw std::invalid_argument(what);
}

}  // namespace

std::string ConnectionOptions::guarded_dsn() const {
    return common::guarded_dsn(dsn, db_deadline());
}

void ConnectionOptions::validate() const {
    require(!dsn.empty(), "--dsn (ACLAIM_DSN) is required");
    require(db_deadline_ms >= 100, "--db-deadline-ms must be at least 100");
}

void RouterOptions::validate() const {
    require(common::is_zmq_endpoint(bind),
            "--bind must be an endpoint such as tcp://*:5555, not '" + bind + "'");
    require(lease_ms >= 100, "--lease-ms must be at least 100");
    require(heartbeat_ms >= 0 && heartbeat_ms < lease_ms,
            "--heartbeat-ms must be shorter than the lease");
    require(max_body_bytes >= 64 && max_body_bytes <= common::proto::kMaxBodyBytes,
            "--max-body-bytes must be 64.." + std::to_string(common::proto::kMaxBodyBytes));
    require(max_inflight_per_session >= 1, "--max-inflight-per-session must be positive");
    require(max_queued_requests >= 1, "--max-queued-requests must be positive");
    require(max_sessions_per_key >= 1, "--max-sessions-per-key must be positive");
    require(max_sessions_per_org >= 1, "--max-sessions-per-org must be positive");
    require(max_parked_per_session >= 1, "--max-parked-per-session must be positive");
    require(max_parked_per_org >= 1, "--max-parked-per-org must be positive");
    require(fd_reserve >= 0, "--fd-reserve must not be negative");
    require(socket_hwm >= 1, "--socket-hwm must be positive");
    require(io_threads >= 1 && io_threads <= 16, "--io-threads must be 1..16");
    require(drain_timeout_ms >= 0, "--drain-timeout-ms must not be negative");
}

void DbPoolOptions::validate() const {
    require(db_threads >= 1 && db_threads <= 64, "--db-threads must be 1..64");
    require(db_spill_ms >= 0 && db_spill_ms <= 60'000, "--db-spill-ms must be 0..60000");
    require(in_doubt_budget_ms >= 0, "--in-doubt-budget-ms must not be negative");
}

void ReaperOptions::validate() const {
    require(reap_interval_ms >= 1, "--reap-interval-ms must be positive");
    require(reap_batch >= 1 && reap_batch <= 10000, "--reap-batch must be 1..10000");
}

void PresenceOptions::validate() const {
    require(interval_ms == 0 || (interval_ms >= 100 && interval_ms <= 3'600'000),
            "--presence-interval-ms must be 0 (off) or 100..3600000");
}

void SchedulerOptions::validate() const {
    require(interval_ms == 0 || (interval_ms >= 10 && interval_ms <= 3'600'000),
            "--schedule-interval-ms must be 0 (off) or 10..3600000");
}

void AgingOptions::validate() const {
    require(interval_ms == 0 || (interval_ms >= 10 && interval_ms <= 3'600'000),
            "--aging-interval-ms must be 0 (off) or 10..3600000");
    require(batch >= 1 && batch <= 100000, "--aging-batch must be 1..100000");
}

void RetentionOptions::validate() const {
    require(retention_interval_ms >= 10, "--retention-interval-ms must be at least 10");
    require(retention_batch >= 1 && retention_batch <= 10000, "--retention-batch must be 1..10000");
    require(retention_pause_ms >= 0, "--retention-pause-ms must not be negative");
    require(partitions_ahead >= 1 && partitions_ahead <= 24, "--partitions-ahead must be 1..24");
}

void CurveOptions::validate(bool plaintext) const {
    require(handshake_timeout_ms >= 100, "--handshake-timeout-ms must be at least 100");
    // Without a key the only way to learn a worker's organization is to believe it, so that must
    // be an explicit development choice.
    require(plaintext || !curve_secret_key.empty() || !curve_secret_key_file.empty(),
            "pass --curve-secret-key or --curve-secret-key-file (see aclaimctl keys generate "
            "--server), or --plaintext (ACLAIM_PLAINTEXT=1) for development only");
    require(curve_secret_key.empty() || curve_secret_key_file.empty(),
            "pass --curve-secret-key or --curve-secret-key-file, not both");
}

std::string CurveOptions::load_secret() const {
    std::string key = curve_secret_key;
    if (!curve_secret_key_file.empty()) {
        std::ifstream in(curve_secret_key_file);
        require(static_cast<bool>(in),
                "cannot read --curve-secret-key-file " + curve_secret_key_file);
        std::getline(in, key);
    }
    while (!key.empty() && std::isspace(static_cast<unsigned char>(key.back()))) key.pop_back();
    require(key.size() == 40, "the CURVE secret key must be 40 characters of Z85");
    return key;
}

void ZapOptions::validate() const {
    require(key_cache_ms >= 0, "--key-cache-ms must not be negative");
}

void HttpOptions::validate() const {
    require(http_bind.empty() || common::parse_host_port(http_bind).has_value(),
            "--http-bind must be host:port (port 0..65535) or empty, not '" + http_bind + "'");
}

HttpOptions CoordinatorOptions::http_endpoint() const {
    HttpOptions h = http;
    h.dsn = connection.dsn;
    h.plaintext = router.plaintext;
    h.db_threads = db_pool.db_threads;
    return h;
}

void CoordinatorOptions::validate() const {
    connection.validate();
    db_pool.validate();
    router.validate();
    reaper.validate();
    presence.validate();
    scheduler.validate();
    aging.validate();
    retention.validate();
    http.validate();
    zap.validate();
    curve.validate(router.plaintext);
}

void add_cli_options(CLI::App& app, CoordinatorOptions& o) {
    using common::add_on_off;
    using common::add_setting;
    using common::add_switch;
    auto& c = o.connection;
    auto& r = o.router;
    auto& d = o.db_pool;
    auto& t = o.retention;
    add_setting(app, "--dsn", c.dsn, "PostgreSQL connection string");
    add_setting(app, "--bind", r.bind, "ZeroMQ endpoint of the ROUTER socket");
    add_setting(app, "--lease-ms", r.lease_ms, "Lease length in milliseconds");
    add_setting(app, "--heartbeat-ms", r.heartbeat_ms,
                "Renewal interval told to workers; 0 means a third of the lease");
    add_setting(app, "--db-threads", d.db_threads, "Database threads, one connection each");
    add_setting(app, "--db-spill-ms", d.db_spill_ms,
                "With --coalesce on, DB threads after the first take requests only once the "
                "oldest has waited this long, in milliseconds; 0: every thread takes at once");
    add_on_off(app, "--coalesce", d.coalesce,
               "Coalesce queued claims (per organization), renewals and completions: on or off");
    add_on_off(app, "--row-security", c.row_security,
               "Act as the aclaim_coordinator role under row-level security, each transaction "
               "scoped to its organization: on or off");
    add_setting(app, "--reap-interval-ms", o.reaper.reap_interval_ms,
                "Pause between reaper passes");
    add_setting(app, "--reap-batch", o.reaper.reap_batch, "Leases reclaimed per reaper statement");
    add_setting(app, "--presence-interval-ms", o.presence.interval_ms,
                "How often connected workers are published for the console; 0: off");
    add_setting(app, "--schedule-interval-ms", o.scheduler.interval_ms,
                "How often due schedule ticks are enqueued (docs/operations.md, Schedules); 0: "
                "this coordinator schedules nothing");
    add_setting(app, "--aging-interval-ms", o.aging.interval_ms,
                "How often pending jobs of aged queues are raised in priority (docs/operations.md, "
                "Weights and aging); 0: this coordinator ages nothing");
    add_setting(app, "--aging-batch", o.aging.batch, "Jobs raised per aging statement");
    add_on_off(app, "--retention", t.retention,
               "Remove finished jobs past their queue's retention: on or off (job_events "
               "partitions are kept ahead either way)");
    add_setting(app, "--retention-interval-ms", t.retention_interval_ms,
                "Pause between retention passes (one coordinator at a time prunes)");
    add_setting(app, "--retention-batch", t.retention_batch,
                "Finished jobs removed per prune statement and transaction");
    add_setting(app, "--retention-pause-ms", t.retention_pause_ms,
                "Pause between the prune batches of a pass");
    add_setting(app, "--partitions-ahead", t.partitions_ahead,
                "Months of job_events partitions created ahead of the current one");
    add_setting(app, "--max-body-bytes", r.max_body_bytes, "Largest request body accepted");
    add_setting(app, "--log-level", o.log_level, "trace, debug, info, warn, error, critical, off")
        ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
    add_switch(app, "--migrate", o.migrate, "Apply schema migrations before serving");
    add_switch(app, "--plaintext", r.plaintext,
               "Development mode: trust the organization a worker names in HELLO");
    add_setting(app, "--curve-secret-key", o.curve.curve_secret_key,
                "CURVE secret key (Z85) of the ROUTER; workers must know its public key");
    add_setting(app, "--curve-secret-key-file", o.curve.curve_secret_key_file,
                "File holding the CURVE secret key (first line, Z85)");
    add_setting(app, "--key-cache-ms", o.zap.key_cache_ms,
                "How long an accepted worker key is trusted before worker_keys is asked again");
    add_setting(app, "--handshake-timeout-ms", o.curve.handshake_timeout_ms,
                "Connections that have not finished the CURVE handshake by then are dropped");
    add_setting(app, "--clock-skew-ms", o.clock_skew_ms,
                "Offset added to the system clock, for clock-disagreement drills");
    add_setting(app, "--in-doubt-budget-ms", d.in_doubt_budget_ms,
                "How long to try to learn the outcome of an interrupted commit");
    add_setting(app, "--db-deadline-ms", c.db_deadline_ms,
                "Every request is answered within this even while the database hangs; a "
                "statement running this long has its connection cut and replaced");
    add_setting(app, "--max-inflight-per-session", r.max_inflight_per_session,
                "Outstanding requests allowed per worker session");
    add_setting(app, "--max-queued-requests", r.max_queued_requests,
                "Requests waiting for a DB thread before refusing new ones");
    add_setting(app, "--max-sessions-per-key", r.max_sessions_per_key,
                "Sessions one worker key may hold at once; more HELLOs are answered overloaded");
    add_setting(app, "--max-sessions-per-org", r.max_sessions_per_org,
                "Sessions one organization may hold at once; more HELLOs are answered overloaded");
    add_setting(app, "--max-parked-per-session", r.max_parked_per_session,
                "Parked claims one session may hold; more waiting CLAIMs are answered overloaded");
    add_setting(app, "--max-parked-per-org", r.max_parked_per_org,
                "Parked claims one organization may hold; more waiting CLAIMs are answered "
                "overloaded");
    add_setting(app, "--fd-reserve", r.fd_reserve,
                "Connections kept free below the descriptor limit for keys without a session");
    add_setting(app, "--socket-hwm", r.socket_hwm, "ROUTER high-water marks, in messages");
    add_setting(app, "--io-threads", r.io_threads,
                "ZeroMQ I/O threads for the workers' connections (reading, writing, CURVE)");
    add_setting(app, "--drain-timeout-ms", r.drain_timeout_ms,
                "On shutdown, the longest time non-claim requests are still served");
    add_setting(app, "--http-bind", o.http.http_bind,
                "host:port serving /metrics, /healthz and /readyz; empty turns it off");
}

}  // namespace aclaim::coordinator
