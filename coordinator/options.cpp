#include "coordinator/options.hpp"

#include <CLI/CLI.hpp>
#include <cctype>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "common/base/cli_flags.hpp"
#include "common/base/host_port.hpp"
#include "common/store/conninfo.hpp"

namespace aclaim::coordinator {

namespace {

void require(bool ok, const std::string& what) {
    if (!ok) throw std::invalid_argument(what);
}

/// The whole numbers an option may take: `least` and up, to `most`; with `off`, 0 as well (the
/// component turned off).
struct Bounds {
    static constexpr int kNone = std::numeric_limits<int>::max();
    int least = std::numeric_limits<int>::min();
    int most = kNone;
    bool off = false;

    /// Throws std::invalid_argument naming `flag` and these bounds when `value` is outside them.
    void check(const std::string& flag, int value) const {
        if ((off && value == 0) || (value >= least && value <= most)) return;
        const std::string range = std::to_string(least) + ".." + std::to_string(most);
        if (off) throw std::invalid_argument(flag + " must be 0 (off) or " + range);
        if (most != kNone) throw std::invalid_argument(flag + " must be " + range);
        if (least == 0) throw std::invalid_argument(flag + " must not be negative");
        if (least == 1) throw std::invalid_argument(flag + " must be positive");
        throw std::invalid_argument(flag + " must be at least " + std::to_string(least));
    }
};

constexpr Bounds at_least(int least) {
    return {least};
}
constexpr Bounds range(int least, int most) {
    return {least, most};
}
constexpr Bounds off_or(int least, int most) {
    return {least, most, true};
}

/// An on|off option, and a flag present or not.
struct OnOff {
    bool* field;
};
struct Switch {
    bool* field;
};

/// One option of the coordinator: its flag (and ACLAIM_* variable), where its value lives, its
/// help text and, for a whole number, the values that can work.
struct Option {
    const char* flag;
    std::variant<std::string*, int*, std::size_t*, OnOff, Switch> field;
    const char* help;
    Bounds bounds = {};
};

/// Every option of `o`, each declared once, in the order --help lists them: add_cli_options
/// declares their flags from it and CoordinatorOptions::validate checks their bounds. What one
/// value alone cannot tell (--heartbeat-ms against the lease, --bind's form, the CURVE key) the
/// slices' own validate() checks.
std::vector<Option> declared(CoordinatorOptions& o) {
    auto& c = o.connection;
    auto& r = o.router;
    auto& d = o.db_pool;
    auto& t = o.retention;
    const Bounds positive = at_least(1);
    const Bounds not_negative = at_least(0);
    return {
        {"--dsn", &c.dsn, "PostgreSQL connection string"},
        {"--bind", &r.bind, "ZeroMQ endpoint of the ROUTER socket"},
        {"--lease-ms", &r.lease_ms, "Lease length in milliseconds", at_least(100)},
        {"--heartbeat-ms", &r.heartbeat_ms,
         "Renewal interval told to workers; 0 means a third of the lease"},
        {"--db-threads", &d.db_threads, "Database threads, one connection each", range(1, 64)},
        {"--db-spill-ms", &d.db_spill_ms,
         "With --coalesce on, DB threads after the first take requests only once the oldest has "
         "waited this long, in milliseconds; 0: every thread takes at once",
         range(0, 60'000)},
        {"--coalesce", OnOff{&d.coalesce},
         "Coalesce queued claims (per organization), renewals and completions: on or off"},
        {"--row-security", OnOff{&c.row_security},
         "Act as the aclaim_coordinator role under row-level security, each transaction scoped to "
         "its organization: on or off"},
        {"--reap-interval-ms", &o.reaper.reap_interval_ms, "Pause between reaper passes", positive},
        {"--reap-batch", &o.reaper.reap_batch, "Leases reclaimed per reaper statement",
         range(1, 10000)},
        {"--presence-interval-ms", &o.presence.interval_ms,
         "How often connected workers are published for the console; 0: off",
         off_or(100, 3'600'000)},
        {"--schedule-interval-ms", &o.scheduler.interval_ms,
         "How often due schedule ticks are enqueued (docs/operations.md, Schedules); 0: this "
         "coordinator schedules nothing",
         off_or(10, 3'600'000)},
        {"--aging-interval-ms", &o.aging.interval_ms,
         "How often pending jobs of aged queues are raised in priority (docs/operations.md, "
         "Weights and aging); 0: this coordinator ages nothing",
         off_or(10, 3'600'000)},
        {"--aging-batch", &o.aging.batch, "Jobs raised per aging statement", range(1, 100000)},
        {"--retention", OnOff{&t.retention},
         "Remove finished jobs past their queue's retention: on or off (job_events partitions are "
         "kept ahead either way)"},
        {"--retention-interval-ms", &t.retention_interval_ms,
         "Pause between retention passes (one coordinator at a time prunes)", at_least(10)},
        {"--retention-batch", &t.retention_batch,
         "Finished jobs removed per prune statement and transaction", range(1, 10000)},
        {"--retention-pause-ms", &t.retention_pause_ms, "Pause between the prune batches of a pass",
         not_negative},
        {"--partitions-ahead", &t.partitions_ahead,
         "Months of job_events partitions created ahead of the current one", range(1, 24)},
        {"--max-body-bytes", &r.max_body_bytes, "Largest request body accepted"},
        {"--log-level", &o.log_level, "trace, debug, info, warn, error, critical, off"},
        {"--migrate", Switch{&o.migrate}, "Apply schema migrations before serving"},
        {"--plaintext", Switch{&r.plaintext},
         "Development mode: trust the organization a worker names in HELLO"},
        {"--curve-secret-key", &o.curve.curve_secret_key,
         "CURVE secret key (Z85) of the ROUTER; workers must know its public key"},
        {"--curve-secret-key-file", &o.curve.curve_secret_key_file,
         "File holding the CURVE secret key (first line, Z85)"},
        {"--key-cache-ms", &o.zap.key_cache_ms,
         "How long an accepted worker key is trusted before worker_keys is asked again",
         not_negative},
        {"--handshake-timeout-ms", &o.curve.handshake_timeout_ms,
         "Connections that have not finished the CURVE handshake by then are dropped",
         at_least(100)},
        {"--clock-skew-ms", &o.clock_skew_ms,
         "Offset added to the system clock, for clock-disagreement drills"},
        {"--in-doubt-budget-ms", &d.in_doubt_budget_ms,
         "How long to try to learn the outcome of an interrupted commit", not_negative},
        {"--db-deadline-ms", &c.db_deadline_ms,
         "Every request is answered within this even while the database hangs; a statement "
         "running this long has its connection cut and replaced",
         at_least(100)},
        {"--max-inflight-per-session", &r.max_inflight_per_session,
         "Outstanding requests allowed per worker session", positive},
        {"--max-queued-requests", &r.max_queued_requests,
         "Requests waiting for a DB thread before refusing new ones", positive},
        {"--max-sessions-per-key", &r.max_sessions_per_key,
         "Sessions one worker key may hold at once; more HELLOs are answered overloaded", positive},
        {"--max-sessions-per-org", &r.max_sessions_per_org,
         "Sessions one organization may hold at once; more HELLOs are answered overloaded",
         positive},
        {"--max-parked-per-session", &r.max_parked_per_session,
         "Parked claims one session may hold; more waiting CLAIMs are answered overloaded",
         positive},
        {"--max-parked-per-org", &r.max_parked_per_org,
         "Parked claims one organization may hold; more waiting CLAIMs are answered overloaded",
         positive},
        {"--fd-reserve", &r.fd_reserve,
         "Connections kept free below the descriptor limit for keys without a session",
         not_negative},
        {"--socket-hwm", &r.socket_hwm, "ROUTER high-water marks, in messages", positive},
        {"--io-threads", &r.io_threads,
         "ZeroMQ I/O threads for the workers' connections (reading, writing, CURVE)", range(1, 16)},
        {"--drain-timeout-ms", &r.drain_timeout_ms,
         "On shutdown, the longest time non-claim requests are still served", not_negative},
        {"--http-bind", &o.http.http_bind,
         "host:port serving /metrics, /healthz and /readyz; empty turns it off"},
    };
}

}  // namespace

std::string ConnectionOptions::guarded_dsn() const {
    return store::guarded_dsn(dsn, db_deadline());
}

void ConnectionOptions::validate() const {
    require(!dsn.empty(), "--dsn (ACLAIM_DSN) is required");
}

void RouterOptions::validate() const {
    require(base::is_zmq_endpoint(bind),
            "--bind must be an endpoint such as tcp://*:5555, not '" + bind + "'");
    require(heartbeat_ms >= 0 && heartbeat_ms < lease_ms,
            "--heartbeat-ms must be shorter than the lease");
    require(max_body_bytes >= 64 && max_body_bytes <= proto::kMaxBodyBytes,
            "--max-body-bytes must be 64.." + std::to_string(proto::kMaxBodyBytes));
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

void HttpOptions::validate() const {
    require(http_bind.empty() || base::parse_host_port(http_bind).has_value(),
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
    CoordinatorOptions read = *this;
    for (const Option& option : declared(read)) {
        if (const auto* field = std::get_if<int*>(&option.field))
            option.bounds.check(option.flag, **field);
    }
    router.validate();
    http.validate();
    curve.validate(router.plaintext);
}

void add_cli_options(CLI::App& app, CoordinatorOptions& o) {
    for (const Option& option : declared(o)) {
        std::visit(
            [&](auto field) {
                using Field = decltype(field);
                if constexpr (std::is_same_v<Field, OnOff>) {
                    base::add_on_off(app, option.flag, *field.field, option.help);
                } else if constexpr (std::is_same_v<Field, Switch>) {
                    base::add_switch(app, option.flag, *field.field, option.help);
                } else {
                    base::add_setting(app, option.flag, *field, option.help);
                }
            },
            option.field);
    }
    app.get_option("--log-level")
        ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
}

}  // namespace aclaim::coordinator
