#include "drills/canary.d/observers.hpp"

#include <algorithm>
#include <cmath>

#include "common/base/clock.hpp"

namespace aclaim::drills {

namespace {

/// Waiting lock requests of this database, one row per waiting session. waitstart (PostgreSQL
/// 14+) times the current lock wait itself, which lock_timeout bounds; a statement may wait more
/// than once. The claim is recognised by its text: every claim plan's statement
/// (common/store/claim_plan.cpp) has the CTE `picked AS MATERIALIZED`.
constexpr const char* kLockWaits = R"SQL(
SELECT position('picked AS MATERIALIZED' IN a.query) > 0,
       l.locktype,
       coalesce(extract(epoch FROM clock_timestamp() - l.waitstart) * 1000, 0)::float8
  FROM pg_stat_activity a
  JOIN pg_locks l ON l.pid = a.pid AND NOT l.granted
 WHERE a.datname = current_database() AND a.wait_event_type = 'Lock'
   AND a.pid <> pg_backend_pid()
)SQL";

constexpr const char* kPendingCount =
    "SELECT count(*) FROM jobs WHERE org_id = $1 AND state = 'pending'";

/// Below this many pending jobs the backlog is topped up whatever the level.
constexpr std::int64_t kBacklogFloor = 50;
/// The backlog covers this many seconds of the current level's appetite.
constexpr double kBacklogCoverSeconds = 2.0;
/// One enqueue statement adds at most this many jobs.
constexpr std::int64_t kEnqueueBatch = 1000;

void add_all(std::map<std::string, std::int64_t>& to,
             const std::map<std::string, std::int64_t>& from) {
    for (const auto& [k, v] : from) to[k] += v;
}

}  // namespace

void Periodic::start(std::chrono::milliseconds period, std::function<void()> tick) {
    task_.start(base::PeriodicTask::Wait{0}, [this, period, tick = std::move(tick)] {
        try {
            tick();
        } catch (const std::exception& e) {
            errors_.fetch_add(1);
            std::lock_guard error_lock(mutex_);
            last_error_ = e.what();
        }
        return period;
    });
}

void Periodic::stop() {
    task_.stop();
}

std::string Periodic::last_error() const {
    std::lock_guard lock(mutex_);
    return last_error_;
}

void LockSlice::add(const LockSlice& o) {
    samples += o.samples;
    waiting_max = std::max(waiting_max, o.waiting_max);
    claim_waits += o.claim_waits;
    other_waits += o.other_waits;
    claim_wait_max_ms = std::max(claim_wait_max_ms, o.claim_wait_max_ms);
    add_all(by_lock_type, o.by_lock_type);
}

void LockSampler::start() {
    thread_.start(period_, [this] {
        if (!conn_ || !conn_->is_open()) {
            conn_ = std::make_unique<pqxx::connection>(dsn_);
            pqxx::nontransaction(*conn_).exec("SET application_name = 'canary-lock-sampler'");
        }
        pqxx::nontransaction txn(*conn_);
        const auto rows = txn.exec(kLockWaits);
        std::lock_guard lock(mutex_);
        ++current_.samples;
        current_.waiting_max =
            std::max(current_.waiting_max, static_cast<std::int64_t>(rows.size()));
        for (const auto& row : rows) {
            const bool claim = row[0].as<bool>();
            ++(claim ? current_.claim_waits : current_.other_waits);
            ++current_.by_lock_type[row[1].as<std::string>()];
            if (claim)
                current_.claim_wait_max_ms =
                    std::max(current_.claim_wait_max_ms, row[2].as<double>());
        }
    });
}

LockSlice LockSampler::take() {
    std::lock_guard lock(mutex_);
    LockSlice out = std::move(current_);
    current_ = LockSlice{};
    return out;
}

void ProbeSlice::add(const ProbeSlice& o) {
    claim_ms.insert(claim_ms.end(), o.claim_ms.begin(), o.claim_ms.end());
    add_all(outcomes, o.outcomes);
}

void ClaimProbe::start() {
    thread_.start(std::chrono::milliseconds(1000), [this] { probe_once(); });
}

void ClaimProbe::probe_once() {
    if (!store_ || !store_->is_open()) {
        store::StoreOptions options;
        options.application_name = kProbeWorker;
        store_ = std::make_unique<store::AssignmentStore>(dsn_, options);
    }
    const base::SystemClock clock;
    const auto t0 = std::chrono::steady_clock::now();
    const auto outcome =
        store_->claim(org_, {kProbeWorker, 1, queues_}, 60 * base::kSeconds, clock.now());
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    {
        std::lock_guard lock(mutex_);
        current_.claim_ms.push_back(ms);
        ++current_.outcomes[std::string(store::to_string(outcome.status))];
    }
    // The probe's job is finished at once so that it holds nothing the pollers could want.
    for (const auto& lease : outcome.leases) {
        store_->complete({org_, lease.job_id, lease.generation, kProbeWorker,
                          std::string(kProbeWorker) + ":" + std::to_string(lease.job_id)},
                         clock.now());
    }
}

ProbeSlice ClaimProbe::take() {
    std::lock_guard lock(mutex_);
    ProbeSlice out = std::move(current_);
    current_ = ProbeSlice{};
    return out;
}

Backlog::Backlog(std::string dsn, store::OrgId org, double jobs_per_poller_s,
                 const std::atomic<int>& level, std::vector<std::string> queues)
    : dsn_(std::move(dsn)),
      org_(org),
      queues_(std::move(queues)),
      jobs_per_poller_s_(jobs_per_poller_s),
      level_(level) {}

void Backlog::fill() {
    if (!store_) {
        store::StoreOptions options;
        options.application_name = "canary-backlog";
        store_ = std::make_unique<store::AssignmentStore>(dsn_, options);
    }
    top_up(*store_);
}

void Backlog::start() {
    thread_.start(std::chrono::milliseconds(100), [this] {
        if (!store_ || !store_->is_open())
            fill();
        else
            top_up(*store_);
    });
}

void Backlog::top_up(store::AssignmentStore& store) {
    std::int64_t pending = 0;
    {
        pqxx::read_transaction txn(store.connection());
        pending = txn.exec_params1(kPendingCount, org_)[0].as<std::int64_t>();
    }
    const auto low =
        kBacklogFloor + static_cast<std::int64_t>(
                            std::ceil(level_.load() * jobs_per_poller_s_ * kBacklogCoverSeconds));
    std::int64_t added = 0;
    if (pending < low) {
        // Refill to twice the low-water mark so that top-ups come in batches, not a trickle.
        const base::SystemClock clock;
        for (std::int64_t want = 2 * low - pending; want > 0;) {
            const auto n = std::min(want, kEnqueueBatch);
            // One priority for every job: a later enqueue then never outranks a claim's snapshot,
            // which keeps log order a sound clock for the displacement measure.
            std::vector<store::NewJob> jobs(static_cast<std::size_t>(n), {0, "canary", 3});
            for (auto& j : jobs) {
                if (!queues_.empty()) j.queue = queues_[next_queue_++ % queues_.size()];
            }
            store.enqueue(org_, jobs, clock.now());
            want -= n;
            added += n;
        }
    }
    std::lock_guard lock(mutex_);
    current_.enqueued += added;
    current_.pending_min =
        current_.pending_min < 0 ? pending : std::min(current_.pending_min, pending);
}

BacklogSlice Backlog::take() {
    std::lock_guard lock(mutex_);
    BacklogSlice out = current_;
    current_ = BacklogSlice{};
    return out;
}

}  // namespace aclaim::drills
