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

// Each option is declared once, with its default, in the slice of the component that reads it;
// CoordinatorOptions is the slices side by side, and each component takes only its own, so
// that, for instance, the HTTP server never holds key material. Its flag and ACLAIM_* variable
// are declared once too, in options.cpp's table of options, next to the help text
// docs/operations.md's table is checked against and the values that can work: add_cli_options
// and CoordinatorOptions::validate both read that table. A field keeps the name of its flag so
// that errors and code read alike.

/// How every coordinator thread reaches the database: handed to the connection factory
/// (db/connections.hpp), never copied into another slice.
struct ConnectionOptions {
    /// PostgreSQL connection string, URI or keyword form (--dsn).
    std::string dsn;
    /// Run store statements as the aclaim_coordinator role under row-level security, each
    /// transaction scoped to its organization: defence in depth behind every org_id filter
    /// (--row-security).
    bool row_security = true;
    /// The answer bound: a request the database has not answered this long after it was handed
    /// to a DB thread is answered by the coordinator (NO_WORK, or ERROR database_unavailable or
    /// outcome_unknown), and a statement running this long has its connection cut and replaced.
    /// Below the worker's reply timeout (5 s), so that a hanging database never looks like a
    /// dead coordinator (--db-deadline-ms).
    int db_deadline_ms = 2000;

    std::chrono::milliseconds db_deadline() const {
        return std::chrono::milliseconds(db_deadline_ms);
    }
    /// The connection string the serving connections use: dsn with libpq's connect timeout,
    /// keepalives and read-write target (store::guarded_dsn) for this deadline.
    std::string guarded_dsn() const;
    /// Throws std::invalid_argument when no --dsn was given (the bounds of the whole numbers
    /// are CoordinatorOptions::validate's).
    void validate() const;
};

/// The ROUTER socket and the router thread's limits: the coordinator loop, Inbound, Outcomes.
struct RouterOptions {
    /// ZeroMQ endpoint of the ROUTER socket; tcp://127.0.0.1:* binds a free port (--bind).
    std::string bind = "tcp://127.0.0.1:5555";
    /// Length of every granted or renewed lease, in milliseconds (--lease-ms).
    int lease_ms = 10000;
    /// How often workers are told to renew each held job; 0 means a third of the lease
    /// (--heartbeat-ms).
    int heartbeat_ms = 0;
    /// Largest request body accepted; never above the protocol's own limit (--max-body-bytes).
    std::size_t max_body_bytes = proto::kMaxBodyBytes;
    /// Requests one session may have outstanding (parked claims included) before ERROR
    /// (--max-inflight-per-session).
    int max_inflight_per_session = 64;
    /// Requests waiting for a DB thread before new ones are refused with ERROR "overloaded"
    /// (--max-queued-requests).
    int max_queued_requests = 10000;
    /// Sessions one worker key (under CURVE; one worker name of an organization in plaintext) may
    /// hold at once; a HELLO beyond is answered "overloaded" (--max-sessions-per-key).
    int max_sessions_per_key = 64;
    /// Sessions one organization may hold at once; a HELLO beyond is answered "overloaded"
    /// (--max-sessions-per-org).
    int max_sessions_per_org = 25000;
    /// Parked claims (long polls waiting for work) one session may hold; a CLAIM with a wait
    /// beyond is answered "overloaded" (--max-parked-per-session).
    int max_parked_per_session = 64;
    /// Parked claims one organization may hold; a CLAIM with a wait beyond is answered
    /// "overloaded" (--max-parked-per-org).
    int max_parked_per_org = 25000;
    /// Worker connections kept free below the descriptor limit for keys that hold no session: once
    /// the open connections reach the limit less this, a handshake of a key that already has one
    /// is refused, so that a new key's HELLO is still answered (--fd-reserve).
    int fd_reserve = 64;
    /// ZeroMQ high-water marks of the ROUTER socket, in messages, each way (--socket-hwm).
    int socket_hwm = 10000;
    /// ZeroMQ I/O threads: the connections' reading, writing and CURVE work is spread over them,
    /// so that a storm of handshakes is not all on one thread (--io-threads).
    int io_threads = 1;
    /// During shutdown, the longest time requests other than CLAIM are still served, in ms
    /// (--drain-timeout-ms).
    int drain_timeout_ms = 5000;
    /// Development mode: the organization comes from HELLO instead of an authenticated key
    /// (--plaintext).
    bool plaintext = false;

    /// The heartbeat interval in effect (heartbeat_ms, or a third of the lease).
    int effective_heartbeat_ms() const { return heartbeat_ms > 0 ? heartbeat_ms : lease_ms / 3; }
    std::chrono::milliseconds lease() const { return std::chrono::milliseconds(lease_ms); }
    /// Throws std::invalid_argument naming the first flag whose value cannot work that its
    /// bounds alone do not refuse (--bind, --heartbeat-ms against the lease, --max-body-bytes).
    void validate() const;
};

/// The DB threads and the store statements they run: DbPool.
struct DbPoolOptions {
    /// Threads that run store statements, each with its own long-lived connection
    /// (--db-threads).
    int db_threads = 2;
    /// When coalescing, the first DB thread takes requests as they come; the others only once the
    /// oldest waiting request was handed over this many milliseconds ago (--db-spill-ms; 0: all
    /// take at once, as they always do with --coalesce off).
    int db_spill_ms = 3;
    /// Run queued claims of one organization, renewals and completions as one statement each
    /// (--coalesce).
    bool coalesce = true;
    /// How long to try to reach the database to learn whether an interrupted commit happened, in
    /// milliseconds (--in-doubt-budget-ms).
    int in_doubt_budget_ms = 5000;
};

/// The lease reaper, on a connection of its own: Reaper.
struct ReaperOptions {
    /// Pause between reaper passes over expired leases, in milliseconds (--reap-interval-ms).
    int reap_interval_ms = 500;
    /// Leases reclaimed per reaper statement; a pass repeats until a statement returns fewer
    /// (--reap-batch).
    int reap_batch = 100;
};

/// The presence publisher, on a connection of its own: PresencePublisher.
struct PresenceOptions {
    /// How often the workers connected to this coordinator are written to coordinator_presence
    /// (the browser console shows them), in milliseconds; 0 turns it off
    /// (--presence-interval-ms).
    int interval_ms = 5000;
};

/// The scheduler, on a connection of its own: Scheduler.
struct SchedulerOptions {
    /// How often due schedule ticks are enqueued, in milliseconds; 0 turns this coordinator's
    /// scheduler off (--schedule-interval-ms). A tick is enqueued within about this long of its
    /// time while any coordinator runs one.
    int interval_ms = 1000;
};

/// Priority aging (schema/baseline/tables.sql), on a connection of its own: Ager. One coordinator
/// at a time (the holder of the aging lock) raises the priority of aged queues' pending jobs.
struct AgingOptions {
    /// How often pending jobs of aged queues are raised, in milliseconds; 0 turns this
    /// coordinator's ager off (--aging-interval-ms). The aging bound counts one interval
    /// (docs/guarantees.md).
    int interval_ms = 1000;
    /// Jobs raised per statement; a pass that raised this many is followed by the next at once.
    int batch = 1000;
};

/// Retention, on a connection of its own: Retention. One coordinator at a time (the holder of the
/// retention lock) prunes and keeps job_events' partitions ahead.
struct RetentionOptions {
    /// Remove finished jobs once their queue's retention for their state has passed
    /// (--retention); partitions are kept ahead either way.
    bool retention = true;
    /// Pause between retention passes, in milliseconds (--retention-interval-ms).
    int retention_interval_ms = 60000;
    /// Jobs removed per prune statement and transaction (--retention-batch).
    int retention_batch = 500;
    /// Pause between two prune batches of a pass, in milliseconds: paces the deletes
    /// (--retention-pause-ms).
    int retention_pause_ms = 50;
    /// Months of job_events partitions kept ahead of the current one (--partitions-ahead).
    int partitions_ahead = 3;
};

/// The ROUTER's CURVE server side: the one slice that holds the secret key, read by the
/// coordinator when it binds and handed to libzmq, never to another component. Whether CURVE is
/// on at all is the router's RouterOptions::plaintext.
struct CurveOptions {
    /// The coordinator's CURVE secret key (Z85); required unless plaintext. Never logged
    /// (--curve-secret-key).
    std::string curve_secret_key;
    /// A file whose first line is the secret key, instead of passing it on the command line
    /// (--curve-secret-key-file).
    std::string curve_secret_key_file;
    /// A connection whose CURVE handshake has not finished by then is dropped, in milliseconds
    /// (--handshake-timeout-ms).
    int handshake_timeout_ms = 5000;

    /// Throws std::invalid_argument naming the first flag whose value cannot work.
    void validate(bool plaintext) const;
    /// The secret key from curve_secret_key or the file.
    std::string load_secret() const;
};

/// The ZAP handler's lookups of worker keys: ZapHandler.
struct ZapOptions {
    /// How long an accepted worker key is trusted without asking worker_keys again, in ms
    /// (--key-cache-ms).
    int key_cache_ms = 2000;

    std::chrono::milliseconds key_cache() const { return std::chrono::milliseconds(key_cache_ms); }
};

/// The operator's HTTP endpoint: HttpServer and the Prometheus text. No key material. Only
/// http_bind is its own option; the rest it reports, as CoordinatorOptions::http_endpoint()
/// hands them over from their own declarations.
struct HttpOptions {
    /// host:port of the HTTP endpoint for /metrics, /healthz and /readyz; empty turns it off
    /// (--http-bind).
    std::string http_bind = "127.0.0.1:9464";
    /// The database /readyz checks (ConnectionOptions::dsn).
    std::string dsn;
    /// Exported as aclaim_auth_curve_enabled (RouterOptions::plaintext).
    bool plaintext = false;
    /// Exported as aclaim_db_threads (DbPoolOptions::db_threads).
    int db_threads = 0;

    /// Throws std::invalid_argument naming the first flag whose value cannot work.
    void validate() const;
};

/// Everything a coordinator is configured with, as main.cpp parses it and tests build it: the
/// slices side by side, each option in exactly one of them. Components receive their slice, not
/// the whole.
struct CoordinatorOptions {
    ConnectionOptions connection;
    RouterOptions router;
    DbPoolOptions db_pool;
    ReaperOptions reaper;
    PresenceOptions presence;
    SchedulerOptions scheduler;
    AgingOptions aging;
    RetentionOptions retention;
    CurveOptions curve;
    ZapOptions zap;
    HttpOptions http;
    // The process's own, read by main.cpp and the coordinator's start-up.
    /// spdlog level: trace, debug, info, warn, error, critical, off (--log-level).
    std::string log_level = "info";
    /// Apply the embedded schema migrations before serving (--migrate).
    bool migrate = false;
    /// Offset added to the system clock, to rehearse coordinators whose clocks disagree
    /// (--clock-skew-ms).
    int clock_skew_ms = 0;

    /// The HTTP slice with what it reports filled in from their declarations.
    HttpOptions http_endpoint() const;

    /// Validates every option and slice; throws std::invalid_argument naming the first flag that
    /// cannot work.
    void validate() const;
};

/// Declares every option on a CLI11 app, each with its ACLAIM_* environment variable.
void add_cli_options(CLI::App& app, CoordinatorOptions& options);

}  // namespace aclaim::coordinator
