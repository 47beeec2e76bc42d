#include "coordinator/router/coordinator.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <pqxx/pqxx>
#include <thread>

#include "common/base/backoff.hpp"
#include "common/base/clock.hpp"
#include "common/store/assignment_store.hpp"
#include "common/store/migrations.hpp"
#include "coordinator/auth/zap.hpp"
#include "coordinator/db/ager.hpp"
#include "coordinator/db/db_pool.hpp"
#include "coordinator/db/listener.hpp"
#include "coordinator/db/mailbox.hpp"
#include "coordinator/db/reaper.hpp"
#include "coordinator/db/result_notifier.hpp"
#include "coordinator/db/retention.hpp"
#include "coordinator/db/scheduler.hpp"

namespace aclaim::coordinator {

namespace {

/// Longest single poll: bounds how late a stop request is noticed.
constexpr auto kMaxPollWait = std::chrono::milliseconds(100);
/// How long start-up keeps trying to reach the database to apply migrations.
constexpr auto kMigrationBudget = std::chrono::seconds(30);
constexpr auto kHousekeepingEvery = std::chrono::seconds(1);
/// The idle-session sweep (SessionTable::expire_idle) covers the table within this many
/// housekeeping rounds, looking at no fewer than kSweepAtLeast sessions a round: a session is
/// forgotten about 8 s past its idle limit (a pass more when the table grew and reordered).
constexpr std::size_t kSweepRounds = 8;
constexpr std::size_t kSweepAtLeast = 1024;
/// How long the last replies may take to leave once the socket is closed.
constexpr int kLingerMs = 1000;
/// A drain with nothing left at the database still lasts until no request has come for this
/// long (or the drain timeout ends it), so that requests in flight when the signal came, such as
/// a COMPLETE sent just after its worker's claim was answered `draining`, are still served.
constexpr auto kDrainQuiet = std::chrono::milliseconds(200);

/// A session silent this long is forgotten. Workers renew and long-poll well within it; one
/// that comes back after it gets no_session and says HELLO again.
SteadyClock::duration idle_limit(const RouterOptions& o) {
    return std::max<SteadyClock::duration>(5 * o.lease(), std::chrono::seconds(120));
}

void apply_migrations(const std::string& dsn, const base::Clock& clock) {
    const auto deadline = clock.monotonic_now() + kMigrationBudget;
    base::Backoff backoff;
    while (true) {
        try {
            pqxx::connection conn(dsn);
            const auto report = store::migrate(conn);
            spdlog::info("schema at version {} ({} migrations applied now)", report.version,
                         report.applied.size());
            return;
        } catch (const pqxx::broken_connection& e) {
            const auto delay = backoff.next();
            if (clock.monotonic_now() + delay > deadline) throw;
            spdlog::warn("cannot reach the database to migrate ({}); retrying", e.what());
            std::this_thread::sleep_for(delay);
        }
    }
}

/// Fails start-up when the login cannot act as the row-security role: a configuration error that
/// retrying would only hide. A database that cannot be reached is not one; serving starts and the
/// DB threads reconnect as usual.
void check_row_security_role(const Connections& connections) {
    try {
        connections.open("aclaim-coordinator", Connections::Role::RowSecurity);
    } catch (const pqxx::broken_connection& e) {
        spdlog::warn("cannot reach the database to check row security ({}); continuing", e.what());
    }
}

/// How coordinators are told apart in coordinator_presence: the host and the process.
std::string presence_name() {
    std::array<char, 256> host{};
    if (gethostname(host.data(), host.size() - 1) != 0) host[0] = '\0';
    return std::string(host.data()) + "/" + std::to_string(getpid());
}

}  // namespace

Coordinator::Coordinator(CoordinatorOptions options, const base::Clock& clock)
    : options_(std::move(options)),
      clock_(clock),
      watchdog_(clock),
      connections_(options_.connection, watchdog_),
      // Validated in bind(); a context needs at least one I/O thread to be made at all.
      context_(std::clamp(options_.router.io_threads, 1, 16)),
      router_(context_, zmq::socket_type::router),
      sessions_(clock),
      parked_(clock),
      replier_(router_, sessions_, metrics_),
      dispatcher_(queue_, replier_, metrics_, clock, options_.connection.db_deadline()),
      revocations_(sessions_, parked_, replier_, metrics_),
      inbound_(options_.router, {router_, clock, sessions_, parked_, revocations_, wakes_,
                                 dispatcher_, replier_, metrics_}),
      outcomes_(options_.router, {clock, sessions_, parked_, revocations_, wakes_, dispatcher_,
                                  replier_, metrics_}) {}

Coordinator::~Coordinator() {
    stop();
}

const AuthCounters* Coordinator::auth_counters() const {
    return zap_ ? &zap_->counters() : nullptr;
}

void Coordinator::bind() {
    options_.validate();
    const RouterOptions& router = options_.router;
    if (options_.migrate) apply_migrations(options_.connection.dsn, clock_);
    if (connections_.row_security()) check_row_security_role(connections_);
    router_.set(zmq::sockopt::maxmsgsize, proto::socket_max_message_size(!router.plaintext));
    // Replies to peers that are gone fail at once instead of being silently discarded, so that
    // an undeliverable assignment can be released.
    router_.set(zmq::sockopt::router_mandatory, true);
    router_.set(zmq::sockopt::sndhwm, router.socket_hwm);
    router_.set(zmq::sockopt::rcvhwm, router.socket_hwm);
    router_.set(zmq::sockopt::linger, kLingerMs);
    connection_budget_ = std::make_unique<ConnectionBudget>(
        ConnectionBudget::capacity_for(ConnectionBudget::descriptor_limit()),
        static_cast<std::size_t>(router.fd_reserve), &metrics_);
    sessions_.set_key_listener(
        [budget = connection_budget_.get()](store::OrgId org, const std::string& name, bool any) {
            budget->set_has_sessions(org, name, any);
        });
    const CurveOptions& curve = options_.curve;
    router_.set(zmq::sockopt::handshake_ivl, curve.handshake_timeout_ms);
    if (!router.plaintext) {
        const std::string secret = curve.load_secret();
        zap_ = std::make_unique<ZapHandler>(context_, options_.zap, connections_, metrics_.auth,
                                            clock_);
        zap_->set_budget(connection_budget_.get());
        router_.set(zmq::sockopt::curve_server, true);
        router_.set(zmq::sockopt::curve_secretkey, secret);
        // A non-empty domain makes libzmq consult the ZAP handler for every handshake.
        router_.set(zmq::sockopt::zap_domain, "aclaim");
        spdlog::info("CURVE on: server public key {}", curve_public_of(secret));
    }
    accept_monitor_ = std::make_unique<AcceptMonitor>(context_, router_, metrics_, clock_,
                                                      connection_budget_.get());
    router_.bind(router.bind);
    endpoint_ = router_.get(zmq::sockopt::last_endpoint);
    mailbox_ = std::make_unique<Mailbox>(context_);
    results_ = std::make_unique<ResultNotifier>(connections_, metrics_.results);
    pool_ = std::make_unique<DbPool>(options_.db_pool, connections_, router.lease(), clock_, queue_,
                                     *mailbox_, metrics_, results_.get());
    reaper_ = std::make_unique<Reaper>(options_.reaper, connections_, clock_, *mailbox_, metrics_);
    retention_ = std::make_unique<Retention>(options_.retention, connections_, clock_, metrics_);
    scheduler_ = std::make_unique<Scheduler>(options_.scheduler, connections_, clock_, metrics_);
    ager_ = std::make_unique<Ager>(options_.aging, connections_, clock_);
    listener_ = std::make_unique<Listener>(connections_, *mailbox_, metrics_.notifications,
                                           [reaper = reaper_.get()] { reaper->nudge(); });
    presence_ = std::make_unique<PresencePublisher>(
        options_.presence, connections_, presence_name(), endpoint_, clock_, presence_board_);
    bound_ = true;
}

void Coordinator::start() {
    bind();
    thread_ = std::thread([this] {
        try {
            serve();
        } catch (const std::exception& e) {
            spdlog::critical("coordinator stopped by an unexpected error: {}", e.what());
        }
    });
}

void Coordinator::run() {
    if (!bound_) bind();
    serve();
}

void Coordinator::request_stop() {
    stop_requested_.store(true);
}

void Coordinator::stop() {
    request_stop();
    if (thread_.joinable()) thread_.join();
}

void Coordinator::serve() {
    if (options_.router.plaintext) {
        spdlog::warn(
            "plaintext mode: workers are not authenticated and each session acts for the "
            "organization its HELLO names; for development only");
    }
    if (zap_) zap_->start(mailbox_.get());
    watchdog_.start();
    results_->start();
    pool_->start();
    reaper_->start();
    retention_->start();
    scheduler_->start();
    ager_->start();
    listener_->start();
    presence_->start();
    if (!connections_.row_security()) {
        spdlog::warn(
            "row security off: store statements run as the login role, and only their "
            "own org_id filters keep organizations apart");
    }
    spdlog::info("serving on {}: lease {} ms, heartbeat {} ms, {} DB threads, row security {}",
                 endpoint_, options_.router.lease_ms, options_.router.effective_heartbeat_ms(),
                 options_.db_pool.db_threads, connections_.row_security() ? "on" : "off");
    zmq::pollitem_t items[] = {{router_.handle(), 0, ZMQ_POLLIN, 0},
                               {mailbox_->doorbell().handle(), 0, ZMQ_POLLIN, 0},
                               {accept_monitor_->socket().handle(), 0, ZMQ_POLLIN, 0}};
    while (true) {
        const auto now = clock_.monotonic_now();
        if (stop_requested_.load() && !dispatcher_.draining()) begin_drain();
        if (dispatcher_.draining() &&
            ((dispatcher_.at_db() == 0 && now >= drain_quiet_until_) || now >= drain_until_))
            break;
        try {
            zmq::poll(items, 3, poll_timeout(now));
        } catch (const zmq::error_t& e) {
            if (e.num() != EINTR) throw;
            continue;
        }
        {
            // What this round dispatches wakes the DB threads once, at its end.
            const HeldQueue held(queue_);
            if (items[1].revents & ZMQ_POLLIN) outcomes_.process(mailbox_->collect());
            // Only requests that still go to the database hold a drain open: the HELLOs and
            // CLAIMs it refuses at once would keep a crowd of workers, each reconnecting with its
            // backoff, from ever letting the drain go quiet.
            const auto dispatched = dispatcher_.dispatched();
            // Connections that closed first, before their descriptors can be read as new ones'.
            close_connections();
            if ((items[0].revents & ZMQ_POLLIN) && inbound_.read() > 0 && dispatcher_.draining() &&
                dispatcher_.dispatched() != dispatched)
                drain_quiet_until_ = clock_.monotonic_now() + drain_quiet();
        }
        // HELLOs left over from a full round, when nothing new came to read.
        if ((items[0].revents & ZMQ_POLLIN) == 0 && inbound_.hellos_waiting())
            inbound_.admit_hellos();
        housekeeping(clock_.monotonic_now());
    }
    shutdown();
}

std::chrono::milliseconds Coordinator::poll_timeout(SteadyClock::time_point now) const {
    if (inbound_.hellos_waiting()) return std::chrono::milliseconds(0);
    auto until = now + kMaxPollWait;
    if (const auto next = parked_.next_deadline()) until = std::min(until, *next);
    if (const auto next = dispatcher_.next_deadline()) until = std::min(until, *next);
    if (dispatcher_.draining()) until = std::min(until, drain_until_);
    if (until <= now) return std::chrono::milliseconds(0);
    auto timeout = std::chrono::ceil<std::chrono::milliseconds>(until - now);
    if (dispatcher_.draining() && dispatcher_.at_db() == 0) {
        const auto quiet = std::chrono::ceil<std::chrono::milliseconds>(drain_quiet_until_ - now);
        timeout = std::clamp(quiet, std::chrono::milliseconds(0), timeout);
    }
    return timeout;
}

std::chrono::milliseconds Coordinator::drain_quiet() const {
    return std::min<std::chrono::milliseconds>(
        kDrainQuiet, std::chrono::milliseconds(options_.router.drain_timeout_ms));
}

void Coordinator::housekeeping(SteadyClock::time_point now) {
    for (auto& claim : parked_.take_expired()) replier_.answer_no_work(claim, "wait ended");
    outcomes_.refilled(parked_.take_refilled());
    dispatcher_.expire(now);
    close_connections();
    // Gauges and the liveness tick are refreshed every round, so that they stay true however
    // the injected clock moves. /healthz asks whether this thread runs in real time: under a
    // simulated clock a stalled thread must still look stalled, so the tick is the system's.
    metrics_.connected_sessions.store(static_cast<std::int64_t>(sessions_.size()));
    metrics_.claims_waiting.store(static_cast<std::int64_t>(parked_.size()));
    metrics_.db_queued.store(static_cast<std::int64_t>(dispatcher_.queued()));
    metrics_.db_in_flight.store(static_cast<std::int64_t>(dispatcher_.at_db()));
    metrics_.db_connections_abandoned.store(watchdog_.cuts());
    metrics_.router_tick_ns.store(base::SystemClock().monotonic_now().time_since_epoch().count());
    if (now < next_housekeeping_) return;
    next_housekeeping_ = now + kHousekeepingEvery;
    // A slice of the table each round, the whole of it within kSweepRounds rounds: a full sweep
    // of ten thousand idle connections held every claim up for about 2 ms once a second.
    const std::size_t budget = std::max(kSweepAtLeast, sessions_.size() / kSweepRounds);
    if (const auto n = sessions_.expire_idle(idle_limit(options_.router), budget); n > 0) {
        spdlog::info("forgot {} idle sessions", n);
        metrics_.connected_sessions.store(static_cast<std::int64_t>(sessions_.size()));
    }
    // Built again only when a worker came or went (another 1-1.5 ms for ten thousand).
    if (sessions_.membership() != published_membership_) {
        presence_board_.set(sessions_.workers_by_org());
        published_membership_ = sessions_.membership();
    }
}

void Coordinator::close_connections() {
    for (const int fd : accept_monitor_->take_closed()) inbound_.connection_closed(fd);
}

void Coordinator::begin_drain() {
    dispatcher_.begin_drain();
    const auto now = clock_.monotonic_now();
    drain_until_ = now + std::chrono::milliseconds(options_.router.drain_timeout_ms);
    drain_quiet_until_ = now + drain_quiet();
    inbound_.draining_until(drain_until_);
    auto parked = parked_.take_all();
    spdlog::info("draining: no new claims; answering {} parked claims and {} requests in flight",
                 parked.size(), dispatcher_.at_db());
    for (auto& claim : parked) {
        // A session granted reconnect hints (protocol 1.4) is told when to come back: a share
        // of the window this coordinator's sessions ask for, drawn for each.
        const Session* s = sessions_.find(claim.reply.routing_id);
        if (s != nullptr && s->reconnect_hints) {
            replier_.send_error(claim.reply.routing_id, claim.reply.encoding, claim.reply.req,
                                proto::errors::kDraining,
                                "the coordinator is shutting down; reconnect after "
                                "retry_after_ms (another coordinator may serve)",
                                inbound_.retry_after(proto::errors::kDraining, true));
            replier_.finish(claim.reply);
            continue;
        }
        replier_.answer_no_work(claim, std::string(proto::errors::kDraining));
    }
}

void Coordinator::shutdown() {
    // From here on nothing reaches the database: what is waiting on the socket, and what comes
    // until it closes, is answered `draining`.
    inbound_.refuse_remaining();
    // Everything already handed to a DB thread is still executed and answered.
    dispatcher_.close();
    pool_->join();
    results_->stop();
    reaper_->stop();
    retention_->stop();
    scheduler_->stop();
    ager_->stop();
    listener_->stop();
    presence_->stop();
    watchdog_.stop();
    metrics_.db_connections_abandoned.store(watchdog_.cuts());
    outcomes_.process(mailbox_->collect());
    for (auto& claim : parked_.take_all()) {
        replier_.answer_no_work(claim, std::string(proto::errors::kDraining));
    }
    inbound_.refuse_remaining();
    accept_monitor_->stop();
    router_.close();
    if (zap_) zap_->stop();
    spdlog::info("stopped: {}", metrics_.summary());
}

}  // namespace aclaim::coordinator
