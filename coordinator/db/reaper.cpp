#include "coordinator/db/reaper.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>

#include "coordinator/db/store_handle.hpp"

namespace aclaim::coordinator {

Reaper::Reaper(ReaperOptions options, const common::Clock& clock, Mailbox& mailbox,
               Metrics& metrics, StatementWatchdog& watchdog)
    : options_(std::move(options)),
      clock_(clock),
      mailbox_(mailbox),
      metrics_(metrics),
      watchdog_(watchdog) {}

Reaper::~Reaper() {
    stop();
}

void Reaper::start() {
    thread_ = std::thread([this] { run(); });
}

void Reaper::stop() {
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
}

void Reaper::nudge() {
    {
        std::lock_guard lock(mutex_);
        nudged_ = true;
    }
    wake_.notify_all();
}

void Reaper::run() {
    common::StoreOptions store_options;
    store_options.application_name = "aclaim-coordinator-reaper";
    store_options.row_security = options_.row_security;
    const auto watch = watchdog_.watch(store_options.application_name);
    StoreHandle handle(options_.dsn, store_options, clock_);
    Poster poster(mailbox_);
    const auto interval = std::chrono::milliseconds(options_.reap_interval_ms);
    const auto deadline = std::chrono::milliseconds(options_.db_deadline_ms);
    std::optional<common::Instant> next_due;
    bool read_due = true;
    // The reaper's pace is the interval in real time, which is what a condition variable waits
    // on (as before the promoter existed); the promoter's timer ends a wait early when the
    // earliest run_at, on the injected clock, comes sooner.
    auto next_reap = std::chrono::steady_clock::now() + interval;
    while (true) {
        {
            std::unique_lock lock(mutex_);
            auto until = next_reap;
            if (next_due) {
                const auto due_in = std::max(*next_due - clock_.now(), common::Duration{0});
                until = std::min(until, std::chrono::steady_clock::now() + due_in);
            }
            wake_.wait_until(lock, until, [this] { return stop_ || nudged_; });
            if (stop_) return;
            read_due = read_due || nudged_;
            nudged_ = false;
        }
        const bool reap = std::chrono::steady_clock::now() >= next_reap;
        if (reap) next_reap = std::chrono::steady_clock::now() + interval;
        common::AssignmentStore* store = handle.get();
        if (store == nullptr) {
            read_due = true;
            continue;
        }
        const Guarded guarded = [&](const std::function<void()>& call) {
            watch->arm(store->connection().sock(), clock_.monotonic_now() + deadline);
            call();
            return watch->disarm();
        };
        try {
            bool cut = reap && reclaim(*store, poster, guarded);
            if (!cut && next_due && clock_.now() >= *next_due) {
                cut = promote(*store, guarded);
                read_due = true;
            }
            if (!cut && read_due) {
                cut = guarded([&] { next_due = store->next_due(); });
                read_due = cut;
            }
            if (cut) {
                read_due = true;
                handle.drop("cut at its deadline just after answering");
            }
        } catch (const std::exception& e) {
            read_due = true;
            if (watch->disarm() || connection_lost(e, store)) {
                handle.drop(e.what());
            } else {
                spdlog::error("reaper: pass failed: {}", e.what());
            }
        }
    }
}

bool Reaper::reclaim(common::AssignmentStore& store, Poster& poster, const Guarded& guarded) {
    // Repeat while a statement comes back full: a backlog after an outage drains in one pass
    // rather than one batch per interval.
    std::size_t got = 0;
    do {
        const auto started = LatencyClock::now();
        std::vector<common::Reclaimed> reclaimed;
        const bool cut =
            guarded([&] { reclaimed = store.reclaim_expired(clock_.now(), options_.reap_batch); });
        metrics_.statement_latency[Metrics::kReclaimStatement].observe(LatencyClock::now() -
                                                                       started);
        got = reclaimed.size();
        for (const auto& r : reclaimed) {
            metrics_.reclaims.fetch_add(1, std::memory_order_relaxed);
            spdlog::info("reclaim org={} job={} generation={} worker={} outcome={}", r.org_id,
                         r.job_id, r.generation, r.assignee, common::to_string(r.state));
            poster.post(r);
        }
        if (cut) return true;
    } while (got == static_cast<std::size_t>(options_.reap_batch));
    return false;
}

bool Reaper::promote(common::AssignmentStore& store, const Guarded& guarded) {
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
