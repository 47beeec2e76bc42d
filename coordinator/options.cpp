#include "coordinator/options.hpp"

#include <CLI/CLI.hpp>
#include <cctype>
#include <fstream>
#include <stdexcept>

#include "common/base/host_port.hpp"

namespace aclaim::coordinator {

namespace {

void require(bool ok, const std::string& what) {
    if (!ok) throw std::invalid_argument(what);
}

}  // namespace

void RouterOptions::validate() const {
    require(!bind.empty(), "--bind must name an endpoint");
    require(lease_ms >= 100, "--lease-ms must be at least 100");
    require(heartbeat_ms >= 0 && heartbeat_ms < lease_ms,
            "--heartbeat-ms must be shorter than the lease");
    require(max_body_bytes >= 64 && max_body_bytes <= common::proto::kMaxBodyBytes,
            "--max-body-bytes must be 64.." + std::to_string(common::proto::kMaxBodyBytes));
    require(max_inflight_per_session >= 1, "--max-inflight-per-session must be positive");
    require(max_queued_requests >= 1, "--max-queued-requests must be positive");
    require(socket_hwm >= 1, "--socket-hwm must be positive");
    require(drain_timeout_ms >= 0, "--drain-timeout-ms must not be negative");
    require(db_deadline_ms >= 100, "--db-deadline-ms must be at least 100");
}

void DbPoolOptions::validate() const {
    require(!dsn.empty(), "--dsn (ACLAIM_DSN) is required");
    require(db_threads >= 1 && db_threads <= 64, "--db-threads must be 1..64");
    require(lock_timeout_ms >= 1, "--lock-timeout-ms must be positive");
    require(in_doubt_budget_ms >= 0, "--in-doubt-budget-ms must not be negative");
    require(db_deadline_ms >= 100, "--db-deadline-ms must be at least 100");
    // A claim that waits out its lock timeout must still finish before its connection is cut.
    require(lock_strategy != common::LockStrategy::Wait || db_deadline_ms > lock_timeout_ms,
            "--db-deadline-ms must be longer than --lock-timeout-ms under --lock-strategy wait");
}

void ReaperOptions::validate() const {
    require(reap_interval_ms >= 1, "--reap-interval-ms must be positive");
    require(reap_batch >= 1 && reap_batch <= 10000, "--reap-batch must be 1..10000");
}

void PresenceOptions::validate() const {
    require(interval_ms == 0 || (interval_ms >= 100 && interval_ms <= 3'600'000),
            "--presence-interval-ms must be 0 (off) or 100..3600000");
}

void RetentionOptions::validate() const {
    require(retention_interval_ms >= 10, "--retention-interval-ms must be at least 10");
    require(retention_batch >= 1 && retention_batch <= 10000, "--retention-batch must be 1..10000");
    require(retention_pause_ms >= 0, "--retention-pause-ms must not be negative");
    require(partitions_ahead >= 1 && partitions_ahead <= 24, "--partitions-ahead must be 1..24");
}

void CurveOptions::validate() const {
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
    if (plaintext) return {};
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

RouterOptions CoordinatorOptions::router() const {
    RouterOptions r;
    r.bind = bind;
    r.lease_ms = lease_ms;
    r.heartbeat_ms = heartbeat_ms;
    r.max_body_bytes = max_body_bytes;
    r.max_inflight_per_session = max_inflight_per_session;
    r.max_queued_requests = max_queued_requests;
    r.socket_hwm = socket_hwm;
    r.drain_timeout_ms = drain_timeout_ms;
    r.plaintext = plaintext;
    r.db_deadline_ms = db_deadline_ms;
    return r;
}

DbPoolOptions CoordinatorOptions::db_pool() const {
    DbPoolOptions d;
    d.dsn = dsn;
    d.db_threads = db_threads;
    d.coalesce = coalesce;
    d.row_security = row_security;
    d.lock_strategy = lock_strategy;
    d.lock_timeout_ms = lock_timeout_ms;
    d.in_doubt_budget_ms = in_doubt_budget_ms;
    d.lease_ms = lease_ms;
    d.db_deadline_ms = db_deadline_ms;
    return d;
}

ReaperOptions CoordinatorOptions::reaper() const {
    ReaperOptions r;
    r.dsn = dsn;
    r.row_security = row_security;
    r.reap_interval_ms = reap_interval_ms;
    r.reap_batch = reap_batch;
    r.db_deadline_ms = db_deadline_ms;
    return r;
}

PresenceOptions CoordinatorOptions::presence() const {
    PresenceOptions p;
    p.dsn = dsn;
    p.row_security = row_security;
    p.interval_ms = presence_interval_ms;
    p.db_deadline_ms = db_deadline_ms;
    return p;
}

RetentionOptions CoordinatorOptions::retention_options() const {
    RetentionOptions r;
    r.dsn = dsn;
    r.row_security = row_security;
    r.retention = retention;
    r.retention_interval_ms = retention_interval_ms;
    r.retention_batch = retention_batch;
    r.retention_pause_ms = retention_pause_ms;
    r.partitions_ahead = partitions_ahead;
    r.db_deadline_ms = db_deadline_ms;
    return r;
}

CurveOptions CoordinatorOptions::curve() const {
    CurveOptions c;
    c.plaintext = plaintext;
    c.curve_secret_key = curve_secret_key;
    c.curve_secret_key_file = curve_secret_key_file;
    c.handshake_timeout_ms = handshake_timeout_ms;
    return c;
}

ZapOptions CoordinatorOptions::zap() const {
    ZapOptions z;
    z.dsn = dsn;
    z.key_cache_ms = key_cache_ms;
    return z;
}

HttpOptions CoordinatorOptions::http() const {
    HttpOptions h;
    h.http_bind = http_bind;
    h.dsn = dsn;
    h.plaintext = plaintext;
    h.db_threads = db_threads;
    return h;
}

void CoordinatorOptions::validate() const {
    db_pool().validate();
    router().validate();
    reaper().validate();
    presence().validate();
    retention_options().validate();
    http().validate();
    zap().validate();
    curve().validate();
}

void add_cli_options(CLI::App& app, CoordinatorOptions& o) {
    app.add_option("--dsn", o.dsn, "PostgreSQL connection string")->envname("ACLAIM_DSN");
    app.add_option("--bind", o.bind, "ZeroMQ endpoint of the ROUTER socket")
        ->envname("ACLAIM_BIND")
        ->capture_default_str();
    app.add_option("--lease-ms", o.lease_ms, "Lease length in milliseconds")
        ->envname("ACLAIM_LEASE_MS")
        ->capture_default_str();
    app.add_option("--heartbeat-ms", o.heartbeat_ms,
                   "Renewal interval told to workers; 0 means a third of the lease")
        ->envname("ACLAIM_HEARTBEAT_MS")
        ->capture_default_str();
    app.add_option("--db-threads", o.db_threads, "Database threads, one connection each")
        ->envname("ACLAIM_DB_THREADS")
        ->capture_default_str();
    app.add_option_function<std::string>(
           "--coalesce", [&o](const std::string& v) { o.coalesce = v == "on"; },
           "Coalesce queued claims (per organization), renewals and completions: on or off")
        ->envname("ACLAIM_COALESCE")
        ->check(CLI::IsMember({"on", "off"}))
        ->default_str(o.coalesce ? "on" : "off");
    app.add_option_function<std::string>(
           "--row-security", [&o](const std::string& v) { o.row_security = v == "on"; },
           "Act as the aclaim_coordinator role under row-level security, each transaction "
           "scoped to its organization: on or off")
        ->envname("ACLAIM_ROW_SECURITY")
        ->check(CLI::IsMember({"on", "off"}))
        ->default_str(o.row_security ? "on" : "off");
    app.add_option_function<std::string>(
           "--lock-strategy",
           [&o](const std::string& name) { o.lock_strategy = *common::parse_lock_strategy(name); },
           "What a claim does on a locked candidate: skip_locked, nowait or wait")
        ->envname("ACLAIM_LOCK_STRATEGY")
        ->check(CLI::IsMember({"skip_locked", "nowait", "wait"}))
        ->default_str(std::string(common::to_string(o.lock_strategy)));
    app.add_option("--lock-timeout-ms", o.lock_timeout_ms, "Lock wait bound under 'wait'")
        ->envname("ACLAIM_LOCK_TIMEOUT_MS")
        ->capture_default_str();
    app.add_option("--reap-interval-ms", o.reap_interval_ms, "Pause between reaper passes")
        ->envname("ACLAIM_REAP_INTERVAL_MS")
        ->capture_default_str();
    app.add_option("--reap-batch", o.reap_batch, "Leases reclaimed per reaper statement")
        ->envname("ACLAIM_REAP_BATCH")
        ->capture_default_str();
    app.add_option("--presence-interval-ms", o.presence_interval_ms,
                   "How often connected workers are published for the console; 0: off")
        ->envname("ACLAIM_PRESENCE_INTERVAL_MS")
        ->capture_default_str();
    app.add_option_function<std::string>(
           "--retention", [&o](const std::string& v) { o.retention = v == "on"; },
           "Remove finished jobs past their queue's retention: on or off (job_events "
           "partitions are kept ahead either way)")
        ->envname("ACLAIM_RETENTION")
        ->check(CLI::IsMember({"on", "off"}))
        ->default_str(o.retention ? "on" : "off");
    app.add_option("--retention-interval-ms", o.retention_interval_ms,
                   "Pause between retention passes (one coordinator at a time prunes)")
        ->envname("ACLAIM_RETENTION_INTERVAL_MS")
        ->capture_default_str();
    app.add_option("--retention-batch", o.retention_batch,
                   "Finished jobs removed per prune statement and transaction")
        ->envname("ACLAIM_RETENTION_BATCH")
        ->capture_default_str();
    app.add_option("--retention-pause-ms", o.retention_pause_ms,
                   "Pause between the prune batches of a pass")
        ->envname("ACLAIM_RETENTION_PAUSE_MS")
        ->capture_default_str();
    app.add_option("--partitions-ahead", o.partitions_ahead,
                   "Months of job_events partitions created ahead of the current one")
        ->envname("ACLAIM_PARTITIONS_AHEAD")
        ->capture_default_str();
    app.add_option("--max-body-bytes", o.max_body_bytes, "Largest request body accepted")
        ->envname("ACLAIM_MAX_BODY_BYTES")
        ->capture_default_str();
    app.add_option("--log-level", o.log_level, "trace, debug, info, warn, error, critical, off")
        ->envname("ACLAIM_LOG_LEVEL")
        ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}))
        ->capture_default_str();
    app.add_flag("--migrate", o.migrate, "Apply schema migrations before serving")
        ->envname("ACLAIM_MIGRATE");
    app.add_flag("--plaintext", o.plaintext,
                 "Development mode: trust the organization a worker names in HELLO")
        ->envname("ACLAIM_PLAINTEXT");
    app.add_option("--curve-secret-key", o.curve_secret_key,
                   "CURVE secret key (Z85) of the ROUTER; workers must know its public key")
        ->envname("ACLAIM_CURVE_SECRET_KEY");
    app.add_option("--curve-secret-key-file", o.curve_secret_key_file,
                   "File holding the CURVE secret key (first line, Z85)")
        ->envname("ACLAIM_CURVE_SECRET_KEY_FILE");
    app.add_option("--key-cache-ms", o.key_cache_ms,
                   "How long an accepted worker key is trusted before worker_keys is asked again")
        ->envname("ACLAIM_KEY_CACHE_MS")
        ->capture_default_str();
    app.add_option("--handshake-timeout-ms", o.handshake_timeout_ms,
                   "Connections that have not finished the CURVE handshake by then are dropped")
        ->envname("ACLAIM_HANDSHAKE_TIMEOUT_MS")
        ->capture_default_str();
    app.add_option("--clock-skew-ms", o.clock_skew_ms,
                   "Offset added to the system clock, for clock-disagreement drills")
        ->envname("ACLAIM_CLOCK_SKEW_MS")
        ->capture_default_str();
    app.add_option("--in-doubt-budget-ms", o.in_doubt_budget_ms,
                   "How long to try to learn the outcome of an interrupted commit")
        ->envname("ACLAIM_IN_DOUBT_BUDGET_MS")
        ->capture_default_str();
    app.add_option("--db-deadline-ms", o.db_deadline_ms,
                   "Every request is answered within this even while the database hangs; a "
                   "statement running this long has its connection cut and replaced")
        ->envname("ACLAIM_DB_DEADLINE_MS")
        ->capture_default_str();
    app.add_option("--max-inflight-per-session", o.max_inflight_per_session,
                   "Outstanding requests allowed per worker session")
        ->envname("ACLAIM_MAX_INFLIGHT_PER_SESSION")
        ->capture_default_str();
    app.add_option("--max-queued-requests", o.max_queued_requests,
                   "Requests waiting for a DB thread before refusing new ones")
        ->envname("ACLAIM_MAX_QUEUED_REQUESTS")
        ->capture_default_str();
    app.add_option("--socket-hwm", o.socket_hwm, "ROUTER high-water marks, in messages")
        ->envname("ACLAIM_SOCKET_HWM")
        ->capture_default_str();
    app.add_option("--drain-timeout-ms", o.drain_timeout_ms,
                   "On shutdown, the longest time non-claim requests are still served")
        ->envname("ACLAIM_DRAIN_TIMEOUT_MS")
        ->capture_default_str();
    app.add_option("--http-bind", o.http_bind,
                   "host:port serving /metrics, /healthz and /readyz; empty turns it off")
        ->envname("ACLAIM_HTTP_BIND")
        ->capture_default_str();
}

}  // namespace aclaim::coordinator
