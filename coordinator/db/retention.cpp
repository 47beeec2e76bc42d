#include "coordinator/db/retention.hpp"

#include <spdlog/spdlog.h>

#include <utility>

#include "common/ops/retention_store.hpp"

namespace aclaim::coordinator {

namespace {
/// A statement the watchdog cut at its deadline: the connection is gone.
struct CutAtDeadline : std::runtime_error {
    CutAtDeadline() : std::runtime_error("cut at its deadline") {}
};
}  // namespace

Retention::Retention(RetentionOptions options, const Connections& connections,
                     const base::Clock& clock, Metrics& metrics)
    : options_(options), clock_(clock), metrics_(metrics), connections_(connections) {}

void Retention::observe(const store::PartitionSummary& s) {
    using State = Metrics::PartitionState;
    metrics_.partitions[State::Attached].store(s.attached, std::memory_order_relaxed);
    metrics_.partitions[State::Detaching].store(s.detaching, std::memory_order_relaxed);
    metrics_.partitions[State::Archived].store(s.archived, std::memory_order_relaxed);
    metrics_.partitions[State::Dropped].store(s.dropped, std::memory_order_relaxed);
    if (s.covered_until) {
        metrics_.partitions_cover_until_s.store(
            std::chrono::duration_cast<std::chrono::seconds>(s.covered_until->time_since_epoch())
                .count(),
            std::memory_order_relaxed);
    }
}

RetentionPass Retention::pass(store::AssignmentStore& store) {
    RetentionPass out;
    const auto deadline = connections_.deadline();
    // Every call runs under the watchdog when the thread runs it; a test calling pass() directly
    // has no watch.
    auto guarded = [&](const auto& call) {
        if (watch_) watch_->arm(store.connection().sock(), clock_.monotonic_now() + deadline);
        call();
        if (watch_ && watch_->disarm()) throw CutAtDeadline();
    };
    guarded([&] { out.held_lock = store.try_retention_lock(); });
    if (!out.held_lock) {
        metrics_.retention_passes_idle.fetch_add(1, std::memory_order_relaxed);
        return out;
    }
    try {
        metrics_.retention_passes.fetch_add(1, std::memory_order_relaxed);
        guarded([&] {
            out.partitions_created =
                store.ensure_event_partitions(clock_.now(), options_.partitions_ahead);
        });
        for (const auto& name : out.partitions_created) {
            metrics_.partitions_created.fetch_add(1, std::memory_order_relaxed);
            spdlog::info("retention: created partition {} of job_events ahead of time", name);
        }
        std::int64_t got = 0;
        do {
            if (out.batches > 0 &&
                !task_.pause(std::chrono::milliseconds(options_.retention_pause_ms)))
                break;
            if (!options_.retention) break;
            const auto started = LatencyClock::now();
            std::vector<store::Pruned> batch;
            guarded([&] { batch = store.prune_finished(clock_.now(), options_.retention_batch); });
            metrics_.statement_latency[Metrics::Statement::Prune].observe(LatencyClock::now() -
                                                                          started);
            ++out.batches;
            got = 0;
            for (const auto& p : batch) {
                got += p.jobs();
                out.pruned.completed += p.completed;
                out.pruned.failed += p.failed;
                out.pruned.discarded += p.discarded;
                out.pruned.cancelled += p.cancelled;
                out.pruned.results += p.results;
                using State = Metrics::PrunedState;
                for (const auto& [state, n] :
                     {std::pair{State::Completed, p.completed}, std::pair{State::Failed, p.failed},
                      std::pair{State::Discarded, p.discarded},
                      std::pair{State::Cancelled, p.cancelled}}) {
                    metrics_.pruned_jobs[state].fetch_add(static_cast<std::uint64_t>(n),
                                                          std::memory_order_relaxed);
                }
                metrics_.pruned_results.fetch_add(static_cast<std::uint64_t>(p.results),
                                                  std::memory_order_relaxed);
            }
        } while (got == options_.retention_batch);
        // The counts of refused park callbacks are kept in bounds whether or not finished jobs
        // are pruned (--retention): their keep is the schema's, not a queue's
        // (schema/baseline/tables.sql).
        for (int removed = options_.retention_batch, calls = 0; removed == options_.retention_batch;
             ++calls) {
            if (calls > 0 && !task_.pause(std::chrono::milliseconds(options_.retention_pause_ms)))
                break;
            guarded([&] {
                removed = ops::prune_park_refusals(store.connection(), clock_.now(),
                                                   options_.retention_batch);
            });
            out.park_refusals_pruned += removed;
        }
        if (out.park_refusals_pruned > 0) {
            spdlog::info("retention: removed {} counts of refused park callbacks past their keep",
                         out.park_refusals_pruned);
        }
        if (out.pruned.jobs() > 0) {
            spdlog::info(
                "retention: pruned {} finished jobs ({} completed, {} failed, {} discarded, {} "
                "cancelled) and {} results in {} batches",
                out.pruned.jobs(), out.pruned.completed, out.pruned.failed, out.pruned.discarded,
                out.pruned.cancelled, out.pruned.results, out.batches);
        }
        store::PartitionSummary summary;
        guarded([&] { summary = store.partition_summary(); });
        observe(summary);
    } catch (...) {
        if (store.is_open()) {
            try {
                store.release_retention_lock();
            } catch (const std::exception&) {
                // The session ends with the connection, and its lock with it.
            }
        }
        throw;
    }
    guarded([&] { store.release_retention_lock(); });
    return out;
}

void Retention::start() {
    store::StoreOptions store_options;
    store_options.application_name = "aclaim-coordinator-retention";
    watch_ = connections_.watch(store_options.application_name);
    std::shared_ptr<StoreHandle> handle = connections_.store(store_options, clock_);
    // The first pass right away: a coordinator started after a long outage creates the
    // partitions the clock has reached before anything else needs them.
    task_.start(base::PeriodicTask::Wait{0}, [this, handle] {
        const auto next = std::chrono::milliseconds(options_.retention_interval_ms);
        store::AssignmentStore* store = handle->get();
        if (store == nullptr) return next;
        try {
            pass(*store);
        } catch (const CutAtDeadline& e) {
            handle->drop(e.what());
        } catch (const std::exception& e) {
            if (watch_->disarm() || connection_lost(e, store) || !store->is_open()) {
                handle->drop(e.what());
            } else {
                spdlog::error("retention: pass failed: {}", e.what());
            }
        }
        return next;
    });
}

}  // namespace aclaim::coordinator
