#include "coordinator/db/reaper.hpp"

#include <spdlog/spdlog.h>

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

void Reaper::run() {
    common::StoreOptions store_options;
    store_options.application_name = "aclaim-coordinator-reaper";
    store_options.row_security = options_.row_security;
    const auto watch = watchdog_.watch(store_options.application_name);
    StoreHandle handle(options_.dsn, store_options, clock_);
    Poster poster(mailbox_);
    const auto interval = std::chrono::milliseconds(options_.reap_interval_ms);
    while (true) {
        {
            std::unique_lock lock(mutex_);
            if (wake_.wait_for(lock, interval, [this] { return stop_; })) return;
        }
        common::AssignmentStore* store = handle.get();
        if (store == nullptr) continue;
        const auto deadline = std::chrono::milliseconds(options_.db_deadline_ms);
        bool cut = false;
        try {
            // Repeat while a statement comes back full: a backlog after an outage drains in one
            // pass rather than one batch per interval.
            std::size_t got = 0;
            do {
                const auto started = LatencyClock::now();
                watch->arm(store->connection().sock(), clock_.monotonic_now() + deadline);
                const auto reclaimed = store->reclaim_expired(clock_.now(), options_.reap_batch);
                cut = watch->disarm();
                metrics_.statement_latency[Metrics::kReclaimStatement].observe(LatencyClock::now() -
                                                                               started);
                got = reclaimed.size();
                for (const auto& r : reclaimed) {
                    metrics_.reclaims.fetch_add(1, std::memory_order_relaxed);
                    spdlog::info("reclaim org={} job={} generation={} worker={} outcome={}",
                                 r.org_id, r.job_id, r.generation, r.assignee,
                                 common::to_string(r.state));
                    poster.post(r);
                }
            } while (!cut && got == static_cast<std::size_t>(options_.reap_batch));
            if (cut) handle.drop("cut at its deadline just after answering");
        } catch (const std::exception& e) {
            if (watch->disarm() || connection_lost(e, store)) {
                handle.drop(e.what());
            } else {
                spdlog::error("reaper: reclaim failed: {}", e.what());
            }
        }
    }
}

}  // namespace aclaim::coordinator
