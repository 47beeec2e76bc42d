#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include "common/proto/protocol.hpp"
#include "common/store/assignment.hpp"

namespace CLI {
class App;
}

namespace aclaim::coordinator {

// Each component takes only the slice it needs, so that, for instance, the HTTP server never
// holds key material. Slices are cut from CoordinatorOptions, where the flags are parsed and the
// defaults live; a field keeps the name of its flag so that errors and code read alike.

/// The ROUTER socket and the router thread's limits: the coordinator loop, Inbound, Outcomes.
struct RouterOptions {
    /// ZeroMQ endpoint of the ROUTER socket (--bind).
    std::string bind;
    /// Length of every granted or renewed lease, in milliseconds (--lease-ms).
    int lease_ms = 0;
    /// Renewal interval told to workers; 0 means a third of the lease (--heartbeat-ms).
    int heartbeat_ms = 0;
    /// Largest request body accepted (--max-body-bytes).
    std::size_t max_body_bytes = 0;
    /// Outstanding requests allowed per session (--max-inflight-per-session).
    int max_inflight_per_session = 0;
    /// Requests waiting for a DB thread before new ones are refused (--max-queued-requests).
    int max_queued_requests = 0;
    /// ROUTER high-water marks, in messages, each way (--socket-hwm).
    int socket_hwm = 0;
    /// During shutdown, how long requests other than CLAIM are still served (--drain-timeout-ms).
    int drain_timeout_ms = 0;
    /// The organization comes from HELLO instead of an authenticated key (--plaintext).
    bool plaintext = false;
    /// Every request handed to the DB threads is answered within this, in ms (--db-deadline-ms).
    int db_deadline_ms = 0;

    std::chrono::milliseconds db_deadline() const {
        return std::chrono::milliseconds(db_deadline_ms);
    }
    /// The heartbeat interval in effect (heartbeat_ms, or a third of the lease).
    int effective_heartbeat_ms() const { return heartbeat_ms > 0 ? heartbeat_ms : lease_ms / 3; }
    std::chrono::milliseconds lease() const { return std::chrono::milliseconds(lease_ms); }
    /// Throws std::invalid_argument naming the first flag whose value cannot work.
    void validate() const;
};

/// The DB threads and the store statements they run: DbPool.
struct DbPoolOptions {
    /// PostgreSQL connection string (--dsn).
    std::string dsn;
    /// Threads, each with its own long-lived connection (--db-threads).
    int db_threads = 0;
    /// Run queued claims of one organization, renewals and completions as one statement each.
    bool coalesce = true;
    /// Act as aclaim_coordinator under row-level security (--row-security).
    bool row_security = true;
    /// What a claim does on a locked candidate row (--lock-strategy).
    common::LockStrategy lock_strategy = common::LockStrategy::SkipLocked;
    /// Upper bound on a lock wait under `wait`, in milliseconds (--lock-timeout-ms).
    int lock_timeout_ms = 0;
    /// How long to try to learn whether an interrupted commit happened (--in-doubt-budget-ms).
    int in_doubt_budget_ms = 0;
    /// Length of every granted or renewed lease, in milliseconds (--lease-ms).
    int lease_ms = 0;
    /// A statement not answered by then has its connection cut, in ms (--db-deadline-ms).
    int db_deadline_ms = 0;

    std::chrono::milliseconds db_deadline() const {
        return std::chrono::milliseconds(db_deadline_ms);
    }
    /// Throws std::invalid_argument naming the first flag whose value cannot work.
    void validate() const;
};

/// The lease reaper, on a connection of its own: Reaper.
struct ReaperOptions {
    /// PostgreSQL connection string (--dsn).
    std::string dsn;
    /// Act as aclaim_coordinator under row-level security (--row-security).
    bool row_security = true;
    /// Pause between passes, in milliseconds (--reap-interval-ms).
    int reap_interval_ms = 0;
    /// Leases reclaimed per statement (--reap-batch).
    int reap_batch = 0;
    /// A statement not answered by then has its connection cut, in ms (--db-deadline-ms).
    int db_deadline_ms = 0;

    /// Throws std::invalid_argument naming the first flag whose value cannot work.
    void validate() const;
};

/// The presence publisher, on a connection of its own: PresencePublisher.
struct PresenceOptions {
    /// PostgreSQL connection string (--dsn).
    std::string dsn;
    /// Act as aclaim_coordinator under row-level security (--row-security).
    bool row_security = true;
    /// How often the connected workers are published, in ms; 0 turns it off
    /// (--presence-interval-ms).
    int interval_ms = 0;
    /// A statement not answered by then has its connection cut, in ms (--db-deadline-ms).
    int db_deadline_ms = 0;

    /// Throws std::invalid_argument naming the first flag whose value cannot work.
    void validate() const;
};

/// Retention, on a connection of its own: Retention. One coordinator at a time (the holder of the
/// retention lock) prunes and keeps job_events' partitions ahead.
struct RetentionOptions {
    /// PostgreSQL connection string (--dsn).
    std::string dsn;
    /// Act as aclaim_coordinator under row-level security (--row-security).
    bool row_security = true;
    /// Remove finished jobs past their retention (--retention); partitions are kept ahead either
    /// way.
    bool retention = true;
    /// Pause between retention passes, in milliseconds (--retention-interval-ms).
    int retention_interval_ms = 0;
    /// Jobs removed per prune statement and transaction (--retention-batch).
    int retention_batch = 0;
    /// Pause between two prune batches of a pass, in milliseconds (--retention-pause-ms).
    int retention_pause_ms = 0;
    /// Months of job_events partitions kept ahead of the current one (--partitions-ahead).
    int partitions_ahead = 0;
    /// A statement not answered by then has its connection cut, in ms (--db-deadline-ms).
    int db_deadline_ms = 0;

    /// Throws std::invalid_argument naming the first flag whose value cannot work.
    void validate() const;
};

/// The ROUTER's CURVE server side: the one slice that holds the secret key, read by the
/// coordinator when it binds and handed to libzmq, never to another component.
struct CurveOptions {
    /// No CURVE at all (--plaintext).
    bool plaintext = false;
    /// The CURVE secret key, Z85 (--curve-secret-key). Never logged.
    std::string curve_secret_key;
    /// A file whose first line is the secret key (--curve-secret-key-file).
    std::string curve_secret_key_file;
    /// Unfinished handshakes are dropped after this, in milliseconds (--handshake-timeout-ms).
    int handshake_timeout_ms = 0;

    /// Throws std::invalid_argument naming the first flag whose value cannot work.
    void validate() const;
    /// The secret key from curve_secret_key or the file; empty in plaintext mode.
    std::string load_secret() const;
};

/// The ZAP handler's lookups of worker keys: ZapHandler.
struct ZapOptions {
    /// PostgreSQL connection string (--dsn).
    std::string dsn;
    /// How long an accepted worker key is trusted without asking again, in ms (--key-cache-ms).
    int key_cache_ms = 0;

    std::chrono::milliseconds key_cache() const { return std::chrono::milliseconds(key_cache_ms); }
    /// Throws std::invalid_argument naming the first flag whose value cannot work.
    void validate() const;
};

/// The operator's HTTP endpoint: HttpServer and the Prometheus text. No key material.
struct HttpOptions {
    /// host:port for /metrics, /healthz and /readyz; empty turns it off (--http-bind).
    std::string http_bind;
    /// The database /readyz checks (--dsn).
    std::string dsn;
    /// Exported as aclaim_auth_curve_enabled (--plaintext).
    bool plaintext = false;
    /// Exported as aclaim_db_threads (--db-threads).
    int db_threads = 0;

    /// Throws std::invalid_argument naming the first flag whose value cannot work.
    void validate() const;
};

/// Everything a coordinator is configured with, as main.cpp parses it and tests build it. Every
/// field has a flag and an ACLAIM_* variable; components receive slices of it, not the whole.
struct CoordinatorOptions {
    /// PostgreSQL connection string (URI or keyword form).
    std::string dsn;
    /// ZeroMQ endpoint of the ROUTER socket; tcp://127.0.0.1:* binds a free port.
    std::string bind = "tcp://127.0.0.1:5555";
    /// Length of every granted or renewed lease, in milliseconds.
    int lease_ms = 10000;
    /// How often workers are told to renew each held job; 0 means a third of the lease.
    int heartbeat_ms = 0;
    /// Threads that run store statements, each with its own long-lived connection.
    int db_threads = 2;
    /// Run queued claims of one organization, renewals and completions as one statement each.
    bool coalesce = true;
    /// Run store statements as the aclaim_coordinator role under row-level security, each
    /// transaction scoped to its organization (defence in depth behind every org_id filter).
    bool row_security = true;
    /// What a claim does when a candidate row is locked by another transaction.
    common::LockStrategy lock_strategy = common::LockStrategy::SkipLocked;
    /// Upper bound on a lock wait under the `wait` strategy, in milliseconds.
    int lock_timeout_ms = 2000;
    /// Pause between reaper passes over expired leases, in milliseconds.
    int reap_interval_ms = 500;
    /// Leases reclaimed per reaper statement; a pass repeats until a statement returns fewer.
    int reap_batch = 100;
    /// How often the workers connected to this coordinator are written to coordinator_presence
    /// (the browser console shows them), in milliseconds; 0 turns it off.
    int presence_interval_ms = 5000;
    /// Remove finished jobs once their queue's retention for their state has passed.
    bool retention = true;
    /// Pause between retention passes, in milliseconds.
    int retention_interval_ms = 60000;
    /// Jobs removed per prune batch (one statement, one transaction).
    int retention_batch = 500;
    /// Pause between the prune batches of a pass, in milliseconds: paces the deletes.
    int retention_pause_ms = 50;
    /// Months of job_events partitions created ahead of the current month.
    int partitions_ahead = 3;
    /// Largest request body accepted; never above the protocol's own limit.
    std::size_t max_body_bytes = common::proto::kMaxBodyBytes;
    /// spdlog level: trace, debug, info, warn, error, critical, off.
    std::string log_level = "info";
    /// Apply the embedded schema migrations before serving.
    bool migrate = false;
    /// Development mode: the organization comes from HELLO instead of an authenticated key.
    bool plaintext = false;
    /// The coordinator's CURVE secret key (Z85); required unless plaintext. Never logged.
    std::string curve_secret_key;
    /// A file holding the CURVE secret key, instead of passing it on the command line.
    std::string curve_secret_key_file;
    /// How long an accepted worker key is trusted without asking worker_keys again, in ms.
    int key_cache_ms = 2000;
    /// A connection whose CURVE handshake has not finished by then is dropped, in milliseconds.
    int handshake_timeout_ms = 5000;
    /// Offset added to the system clock, to rehearse coordinators whose clocks disagree.
    int clock_skew_ms = 0;
    /// How long to try to reach the database to learn whether an interrupted commit happened.
    int in_doubt_budget_ms = 5000;
    /// The answer bound: a request the database has not answered this long after it was handed
    /// to a DB thread is answered by the coordinator (NO_WORK, or ERROR database_unavailable or
    /// outcome_unknown), and a statement running this long has its connection cut and replaced.
    /// Below the worker's reply timeout (5 s), so that a hanging database never looks like a
    /// dead coordinator.
    int db_deadline_ms = 2000;
    /// Requests one session may have outstanding (parked claims included) before ERROR.
    int max_inflight_per_session = 64;
    /// Requests waiting for a DB thread before new ones are refused with ERROR "overloaded".
    int max_queued_requests = 10000;
    /// ZeroMQ high-water marks of the ROUTER socket, in messages, each way.
    int socket_hwm = 10000;
    /// During shutdown, the longest time requests other than CLAIM are still served, in ms.
    int drain_timeout_ms = 5000;
    /// host:port of the HTTP endpoint for /metrics, /healthz and /readyz; empty turns it off.
    std::string http_bind = "127.0.0.1:9464";

    RouterOptions router() const;
    DbPoolOptions db_pool() const;
    ReaperOptions reaper() const;
    PresenceOptions presence() const;
    RetentionOptions retention_options() const;
    CurveOptions curve() const;
    ZapOptions zap() const;
    HttpOptions http() const;

    /// Validates every slice; throws std::invalid_argument naming the first flag that cannot work.
    void validate() const;
};

/// Declares every option on a CLI11 app, each with its ACLAIM_* environment variable.
void add_cli_options(CLI::App& app, CoordinatorOptions& options);

}  // namespace aclaim::coordinator
