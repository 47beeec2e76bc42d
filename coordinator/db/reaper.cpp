#include "coordinator/db/reaper.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>

namespace aclaim::coordinator {

struct Reaper::Session {
    std::shared_ptr<StatementWatchdog::Watch> watch;
    std::unique_ptr<StoreHandle> handle;
    std::optional<Poster> poster;
    std::optional<base::Instant> next_due;
    bool read_due = true;
    base::MonotonicTime next_reap{};
};

Reaper::Reaper(ReaperOptions options, const Connections& connections, const base::Clock& clock,
               Mailbox& mailbox, Metrics& metrics)
    : options_(options),
      clock_(clock),
      mailbox_(mailbox),
      metrics_(metrics),
      connections_(connections),
      session_(std::make_unique<Session>()) {}

Reaper::~Reaper() = default;

void Reaper::start() {
    store::StoreOptions store_options;
    store_options.application_name = "aclaim-coordinator-reaper";
    session_->watch = connections_.watch(store_options.application_name);
    session_->handle = connections_.store(store_options, clock_);
    session_->next_reap =
        pace_.monotonic_now() + std::chrono::milliseconds(options_.reap_interval_ms);
    // Nudged from the start: the first round reads the earliest run_at at once.
    // The connection and the socket to the router end with the thread, as its own objects.
    task_.start(
        base::PeriodicTask::Wait{0}, [this] { return step(); },
        [this] {
            session_->poster.reset();
            session_->handle.reset();
        });
}

void Reaper::nudge() {
    nudged_.store(true);
    task_.wake();
}

base::PeriodicTask::Wait Reaper::step() {
    Session& s = *session_;
    const auto interval = std::chrono::milliseconds(options_.reap_interval_ms);
    const auto deadline = connections_.deadline();
    // Until the next reap, or the earliest run_at when that comes sooner.
    const auto next_wait = [&] {
        const auto now = pace_.monotonic_now();
        auto until = s.next_reap;
        if (s.next_due) {
            const auto due_in = std::max(*s.next_due - clock_.now(), base::Duration{0});
            until = std::min(until, now + due_in);
        }
        return std::max<base::PeriodicTask::Wait>(until - now, base::PeriodicTask::Wait{0});
    };
    s.read_due = nudged_.exchange(false) || s.read_due;
    const auto now = pace_.monotonic_now();
    const bool reap = now >= s.next_reap;
    if (reap) s.next_reap = now + interval;
    if (!s.poster) s.poster.emplace(mailbox_);
    store::AssignmentStore* store = s.handle->get();
    if (store == nullptr) {
        s.read_due = true;
        return next_wait();
    }
    auto& watch = *s.watch;
    const Guarded guarded = [&](const std::function<void()>& call) {
        watch.arm(store->connection().sock(), clock_.monotonic_now() + deadline);
        call();
        return watch.disarm();
    };
    try {
        bool cut = reap && reclaim(*store, *s.poster, guarded);
        if (!cut && s.next_due && clock_.now() >= *s.next_due) {
            cut = promote(*store, guarded);
            s.read_due = true;
        }
        if (!cut && s.read_due) {
            cut = guarded([&] { s.next_due = store->next_due(); });
            s.read_due = cut;
        }
        if (cut) {
            s.read_due = true;
            s.handle->drop("cut at its deadline just after answering");
        }
    } catch (const std::exception& e) {
        s.read_due = true;
        if (watch.disarm() || connection_lost(e, store)) {
            s.handle->drop(e.what());
        } else {
            spdlog::error("reaper: pass failed: {}", e.what());
        }
    }
    return next_wait();
}

bool Reaper::reclaim(store::AssignmentStore& store, Poster& poster, const Guarded& guarded) {
    // Repeat while a statement comes back full: a backlog after an outage drains in one pass
    // rather than one batch per interval.
    std::size_t got = 0;
    do {
        const auto started = LatencyClock::now();
        std::vector<store::Reclaimed> reclaimed;
        const bool cut =
            guarded([&] { reclaimed = store.reclaim_expired(clock_.now(), options_.reap_batch); });
        metrics_.statement_latency[Metrics::Statement::Reclaim].observe(LatencyClock::now() -
                                                                        started);
        got = reclaimed.size();
        for (const auto& r : reclaimed) {
            metrics_.reclaims.fetch_add(1, std::memory_order_relaxed);
            spdlog::info("reclaim org={} job={} generation={} worker={} outcome={}", r.org_id,
                         r.job_id, r.generation, r.assignee, store::to_string(r.state));
            poster.post(r);
        }
        if (cut) return true;
    } while (got == static_cast<std::size_t>(options_.reap_batch));
    return expire_parks(store, guarded);
}

bool Reaper::expire_parks(store::AssignmentStore& store, const Guarded& guarded) {
    // A parked job has no lease, so no holder to tell: each is logged and counted only.
    std::size_t got = 0;
    do {
        std::vector<store::Reclaimed> expired;
        const bool cut =
            guarded([&] { expired = store.expire_parks(clock_.now(), options_.reap_batch); });
        got = expired.size();
        for (const auto& r : expired) {
            metrics_.parks_expired.fetch_add(1, std::memory_order_relaxed);
            spdlog::info("park expired org={} job={} generation={} worker={} outcome={}", r.org_id,
                         r.job_id, r.generation, r.assignee, store::to_string(r.state));
        }
        if (cut) return true;
    } while (got == static_cast<std::size_t>(options_.reap_batch));
    return false;
}

bool Reaper::promote(store::AssignmentStore& store, const Guarded& guarded) {
    int got = 0;
    do {
        if (guarded([&] { got = store.promote_due(clock_.now(), options_.reap_batch); })) {
            return true;
        }
        if (got > 0) spdlog::debug("promoted {} scheduled jobs", got);
    } while (got == options_.reap_batch);
    return false;
}

}  // namespace aclaim::coordinator
