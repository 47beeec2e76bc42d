#include "coordinator/db/db_pool.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <stdexcept>

#include "coordinator/db/commit_resolution.hpp"
#include "coordinator/db/result_notifier.hpp"
#include "coordinator/db/store_handle.hpp"

namespace aclaim::coordinator {

namespace {

/// Transactions for fewer jobs than this run on generic plans (StoreOptions).
constexpr std::size_t kGenericPlansBelow = 128;

store::StoreOptions store_options(int index, const base::Clock& clock) {
    store::StoreOptions s;
    s.clock = &clock;
    s.application_name = "aclaim-coordinator-db-" + std::to_string(index);
    // Measured on the reviewer shape (64 workers, batches of a few dozen jobs): PostgreSQL spent
    // 146 us a job with its own choice of plans and 107 on generic ones; at the coalesced run's
    // batches of ~140 the custom plans were as fast or faster (docs/performance.md, lever seven).
    s.generic_plans_below = kGenericPlansBelow;
    return s;
}

/// Every request of `out` answered with `failure`.
void fail_all(std::vector<RequestOutcome>& out, const DbFailure& failure) {
    for (auto& o : out) o.result = failure;
}

/// Every request of `out`, answered, stamped with when its statement finished and how long the
/// store's last commit took.
void stamp_finished(std::vector<RequestOutcome>& out, LatencyClock::time_point finished,
                    const store::AssignmentStore& store) {
    for (auto& o : out) {
        o.request.timings.finished = finished;
        o.request.timings.commit = store.last_commit();
    }
}

/// The database did not answer `out` by the deadline: the router has answered (or is about to
/// answer) at the same deadline, so waiting longer here, to resolve the commit from the row,
/// would only hold this thread on a server that does not answer. The connection is dropped and
/// every request answered as at the deadline; a re-send settles it.
std::vector<RequestOutcome> cut_at_deadline(std::vector<RequestOutcome> out, StoreHandle& handle,
                                            std::chrono::milliseconds deadline) {
    handle.drop("no answer within " + std::to_string(deadline.count()) + " ms");
    for (auto& o : out) o.result = answer_at_deadline(o.request.kind(), true, deadline);
    return out;
}

/// The request kinds that have a coalesced statement.
bool coalescible(RequestKind kind) {
    return kind == RequestKind::Claim || kind == RequestKind::Renew ||
           kind == RequestKind::Complete;
}

/// The store's statement for one request of `kind` other than a claim: a renewal extends the
/// lease to `lease` from now, a park waits `park_timeout` from now for its callback.
store::Transition transition_alone(store::AssignmentStore& store, RequestKind kind,
                                   const store::TransitionRequest& q, base::Duration lease,
                                   base::Instant now, std::chrono::milliseconds park_timeout) {
    switch (kind) {
        case RequestKind::Renew:
            return store.renew(q, lease, now);
        case RequestKind::Park: {
            store::TransitionRequest park = q;
            park.park_deadline = now + park_timeout;
            return store.park(park, now);
        }
        case RequestKind::Complete:
            return store.complete(q, now);
        case RequestKind::Fail:
            return store.fail(q, now);
        case RequestKind::Release:
            return store.release(q, now);
        case RequestKind::Progress:
            return store.progress(q, now);
        case RequestKind::Claim:
            break;
    }
    throw std::logic_error("a claim is not a transition");
}

/// Runs one request alone, or several of one kind coalesced into one statement (the queue batches
/// claims of one organization only, and only kinds that have a coalesced statement). One outcome
/// per request, in order.
std::vector<RequestOutcome::Result> run_statement(store::AssignmentStore& store, RequestKind kind,
                                                  const std::vector<RequestOutcome>& batch,
                                                  base::Duration lease, base::Instant now) {
    std::vector<RequestOutcome::Result> results;
    if (kind == RequestKind::Claim) {
        std::vector<store::ClaimRequest> claims;
        claims.reserve(batch.size());
        for (const auto& o : batch) claims.push_back(o.request.ask.claim());
        const store::OrgId org = batch.front().request.ask.org_id;
        if (claims.size() == 1) {
            results.emplace_back(store.claim(org, claims.front(), lease, now));
        } else {
            for (auto& c : store.claim_batch(org, claims, lease, now)) {
                results.emplace_back(std::move(c));
            }
        }
        return results;
    }
    std::vector<store::TransitionRequest> requests;
    requests.reserve(batch.size());
    for (const auto& o : batch) requests.push_back(o.request.ask.transition());
    if (requests.size() == 1) {
        const auto park_timeout =
            std::chrono::milliseconds(batch.front().request.ask.park_timeout_ms);
        results.emplace_back(
            transition_alone(store, kind, requests.front(), lease, now, park_timeout));
        return results;
    }
    auto transitions = kind == RequestKind::Renew ? store.renew_batch(requests, lease, now)
                                                  : store.complete_batch(requests, now);
    for (auto& t : transitions) results.emplace_back(std::move(t));
    return results;
}

/// The statement_latency series that times a request of kind `k`: the series of the kind's own
/// name, looked up once, at compile time, so that a kind without a series does not compile.
Metrics::Statement timed_statement(RequestKind k) {
    static constexpr auto kByKind = [] {
        std::array<Metrics::Statement, static_cast<std::size_t>(RequestKind::Park) + 1> out{};
        for (std::size_t i = 0; i < out.size(); ++i) {
            out[i] = Metrics::kStatements.parse(kind_name(static_cast<RequestKind>(i))).value();
        }
        return out;
    }();
    return kByKind[static_cast<std::size_t>(k)];
}

}  // namespace

DbPool::DbPool(DbPoolOptions options, const Connections& connections,
               std::chrono::milliseconds lease, const base::Clock& clock, WorkQueue& queue,
               Mailbox& mailbox, Metrics& metrics, ResultNotifier* results)
    : options_(options),
      connections_(connections),
      lease_(lease),
      clock_(clock),
      queue_(queue),
      mailbox_(mailbox),
      metrics_(metrics),
      results_(results) {}

DbPool::~DbPool() {
    queue_.close();
    join();
}

void DbPool::start() {
    for (int i = 0; i < options_.db_threads; ++i) threads_.emplace_back([this, i] { run(i); });
}

void DbPool::join() {
    for (auto& t : threads_) {
        if (t.joinable()) t.join();
    }
    threads_.clear();
}

base::MonotonicTime DbPool::deadline() const {
    return clock_.monotonic_now() + connections_.deadline();
}

void DbPool::announce(const RequestOutcome& outcome) const {
    if (results_ == nullptr || outcome.request.kind() != RequestKind::Complete) return;
    // A replay is announced again: the notification of its first commit may have been lost with
    // the coordinator that made it.
    const auto* t = std::get_if<store::Transition>(&outcome.result);
    if (t != nullptr && t->accepted()) results_->committed(outcome.request.ask.org_id);
}

std::vector<DbRequest> DbPool::start_unanswered(std::vector<DbRequest> batch) {
    std::vector<DbRequest> kept;
    kept.reserve(batch.size());
    for (auto& r : batch) {
        auto expected = Stage::Queued;
        // The router answers a request it has given up on; running it now would act on a
        // request whose worker has been told it was not attempted.
        if (r.stage && !r.stage->compare_exchange_strong(expected, Stage::Started)) continue;
        kept.push_back(std::move(r));
    }
    return kept;
}

void DbPool::run(int index) {
    const auto options = store_options(index, clock_);
    const auto watch = connections_.watch(options.application_name);
    const auto owned = connections_.store(options, clock_);
    StoreHandle& handle = *owned;
    // Connect before the first request so that the first worker does not pay for it.
    handle.get();
    Poster poster(mailbox_);
    const std::size_t max_batch = options_.coalesce ? kMaxBatch : 1;
    // Completions and claims share a transaction: a claim passes over locked rows, so it never
    // fails on a lock and rolls back the completions beside it.
    const bool mixed = options_.coalesce;
    // Coalescing, the first thread takes work as it comes, in batches as large as the work allows;
    // the others join once it falls behind, or waits on a lock or a slow flush
    // (docs/performance.md, "One message for the whole transaction, and the DB threads in
    // reserve"). Without coalescing a batch is one request, and every thread takes at once.
    const SteadyClock::duration spill_after = index == 0 || !options_.coalesce
                                                  ? SteadyClock::duration::zero()
                                                  : std::chrono::milliseconds(options_.db_spill_ms);
    WorkQueue::Taker taker;
    while (true) {
        std::vector<DbRequest> taken = queue_.take(max_batch, mixed, spill_after, &taker);
        if (taken.empty()) return;
        std::vector<DbRequest> batch = start_unanswered(std::move(taken));
        if (batch.empty()) continue;
        const auto taken_at = LatencyClock::now();
        for (auto& r : batch) r.timings.taken = taken_at;
        // Without mixed transactions the only batch of two kinds is a completion and the claim
        // its COMPLETE carried, which run one after the other below.
        const bool kinds_mixed = mixed_kinds(batch);
        // A batch's outcomes reach the router thread together, with one doorbell.
        const auto post_all = [&](std::vector<RequestOutcome> outcomes) {
            std::vector<Event> events;
            events.reserve(outcomes.size());
            for (auto& outcome : outcomes) {
                announce(outcome);
                events.emplace_back(std::move(outcome));
            }
            poster.post(std::move(events));
        };
        if (kinds_mixed && mixed) {
            post_all(execute_mixed(handle, *watch, std::move(batch)));
            continue;
        }
        if (!kinds_mixed && batch.size() > 1 && coalescible(batch.front().kind())) {
            post_all(execute(handle, *watch, std::move(batch)));
            continue;
        }
        for (auto& request : batch) {
            std::vector<DbRequest> one;
            one.push_back(std::move(request));
            auto outcome = std::move(execute(handle, *watch, std::move(one)).front());
            announce(outcome);
            poster.post(std::move(outcome));
        }
    }
}

std::vector<RequestOutcome> DbPool::execute(StoreHandle& handle, StatementWatchdog::Watch& watch,
                                            std::vector<DbRequest> batch) {
    std::vector<RequestOutcome> out;
    out.reserve(batch.size());
    for (auto& r : batch) out.push_back(RequestOutcome{std::move(r), DbFailure{}});
    const RequestKind kind = out.front().request.kind();
    const bool harmless = kind == RequestKind::Claim || kind == RequestKind::Renew ||
                          kind == RequestKind::Progress || kind == RequestKind::Park;
    for (int attempt = 0;; ++attempt) {
        // A retry connects at once rather than after the backoff: it follows a connection that
        // was found gone, not a database that refused to connect.
        store::AssignmentStore* store =
            attempt == 0 ? handle.get() : handle.get_within(std::chrono::milliseconds(0));
        if (store == nullptr) {
            fail_all(out, DbFailure{DbFailure::Kind::Unavailable,
                                    "database unavailable: " + handle.last_error()});
            return out;
        }
        const base::Instant now = clock_.now();
        const base::Duration lease = lease_;
        const auto started = LatencyClock::now();
        ArmedWatch armed(watch, store->connection().sock(), deadline());
        try {
            auto results = run_statement(*store, kind, out, lease, now);
            for (std::size_t i = 0; i < out.size(); ++i) out[i].result = std::move(results[i]);
            const auto finished = LatencyClock::now();
            metrics_.statement_latency[timed_statement(kind)].observe(finished - started);
            stamp_finished(out, finished, *store);
            // Answered just as the deadline cut the connection: the answer stands, the
            // connection is gone.
            if (armed.release()) handle.drop("cut at its deadline just after answering");
            return out;
        } catch (const std::exception& e) {
            if (armed.release()) {
                return cut_at_deadline(std::move(out), handle, connections_.deadline());
            }
            if (!connection_lost(e, store)) {
                // The statement failed on a healthy connection, so its transaction rolled back.
                if (out.size() == 1) {
                    const DbRequest& r = out.front().request;
                    spdlog::error("{} of job {} for org {} failed in the database: {}",
                                  kind_name(kind), r.ask.job_id, r.ask.org_id, e.what());
                } else {
                    spdlog::error("coalesced {} of {} requests failed in the database: {}",
                                  kind_name(kind), out.size(), e.what());
                }
                fail_all(out, DbFailure{DbFailure::Kind::Error, e.what()});
                return out;
            }
            handle.drop(e.what());
            // A claim that did commit is reclaimed when its lease runs out; a renewal (and a
            // progress report) is idempotent and safe to re-send. Neither changes anything a worker
            // relies on, so one whose connection was found gone (as the first statement on every
            // connection after a failover is) runs once more on a fresh connection: on whichever
            // host a multi-host DSN now finds writable. The other transitions are resolved one by
            // one from their rows.
            if (harmless && attempt == 0) continue;
            for (auto& o : out) {
                o.result = harmless
                               ? DbFailure{DbFailure::Kind::Unavailable,
                                           std::string("database connection lost: ") + e.what()}
                               : resolve(handle, watch, o.request.ask);
            }
            return out;
        }
    }
}

bool DbPool::mixed_kinds(const std::vector<DbRequest>& batch) {
    return std::any_of(batch.begin(), batch.end(),
                       [&](const DbRequest& r) { return r.kind() != batch.front().kind(); });
}

std::vector<RequestOutcome> DbPool::execute_mixed(StoreHandle& handle,
                                                  StatementWatchdog::Watch& watch,
                                                  std::vector<DbRequest> batch) {
    std::vector<RequestOutcome> out;
    out.reserve(batch.size());
    for (auto& r : batch) out.push_back(RequestOutcome{std::move(r), DbFailure{}});
    std::vector<std::size_t> completing, claiming;
    std::vector<store::TransitionRequest> completions;
    std::vector<store::ClaimRequest> claims;
    for (std::size_t i = 0; i < out.size(); ++i) {
        const DbRequest& r = out[i].request;
        if (r.kind() == RequestKind::Claim) {
            claiming.push_back(i);
            claims.push_back(r.ask.claim());
        } else {
            completing.push_back(i);
            completions.push_back(r.ask.transition());
        }
    }
    const store::OrgId org = out[claiming.front()].request.ask.org_id;
    store::AssignmentStore* store = handle.get();
    if (store == nullptr) {
        fail_all(out, DbFailure{DbFailure::Kind::Unavailable,
                                "database unavailable: " + handle.last_error()});
        return out;
    }
    const auto started = LatencyClock::now();
    ArmedWatch armed(watch, store->connection().sock(), deadline());
    try {
        auto both = store->complete_and_claim(completions, org, claims, lease_, clock_.now());
        for (std::size_t k = 0; k < completing.size(); ++k) {
            out[completing[k]].result = std::move(both.completions[k]);
        }
        for (std::size_t k = 0; k < claiming.size(); ++k) {
            out[claiming[k]].result = std::move(both.claims[k]);
        }
        const auto finished = LatencyClock::now();
        // One statement of each kind as far as the histograms count: the transaction ran both.
        for (const RequestKind kind : {RequestKind::Complete, RequestKind::Claim}) {
            metrics_.statement_latency[timed_statement(kind)].observe(finished - started);
        }
        metrics_.mixed_batches.fetch_add(1, std::memory_order_relaxed);
        stamp_finished(out, finished, *store);
        if (armed.release()) handle.drop("cut at its deadline just after answering");
        return out;
    } catch (const std::exception& e) {
        if (armed.release())
            return cut_at_deadline(std::move(out), handle, connections_.deadline());
        if (!connection_lost(e, store)) {
            spdlog::error(
                "{} completions and {} claims of org {} in one transaction failed in "
                "the database: {}",
                completing.size(), claiming.size(), org, e.what());
            fail_all(out, DbFailure{DbFailure::Kind::Error, e.what()});
            return out;
        }
        handle.drop(e.what());
        // As in execute: the claims are not run again here (one that committed is reclaimed when
        // its lease runs out), and each completion is resolved from its row.
        for (auto& o : out) {
            o.result = o.request.kind() == RequestKind::Claim
                           ? RequestOutcome::Result{DbFailure{
                                 DbFailure::Kind::Unavailable,
                                 std::string("database connection lost: ") + e.what()}}
                           : resolve(handle, watch, o.request.ask);
        }
        return out;
    }
}

RequestOutcome::Result DbPool::resolve(StoreHandle& handle, StatementWatchdog::Watch& watch,
                                       const StoreRequest& r) {
    const store::JobId job = r.job_id;
    store::AssignmentStore* store =
        handle.get_within(std::chrono::milliseconds(options_.in_doubt_budget_ms));
    if (store == nullptr) {
        return DbFailure{DbFailure::Kind::OutcomeUnknown,
                         "connection lost around the commit and the database could not be reached "
                         "within " +
                             std::to_string(options_.in_doubt_budget_ms) +
                             " ms to read the job's row"};
    }
    std::optional<store::RowAuthority> row;
    ArmedWatch armed(watch, store->connection().sock(), deadline());
    try {
        row = store->authority(job);
        if (armed.release()) handle.drop("cut at its deadline just after answering");
    } catch (const std::exception& e) {
        if (armed.release() || connection_lost(e, store)) handle.drop(e.what());
        return DbFailure{DbFailure::Kind::OutcomeUnknown,
                         std::string("connection lost around the commit and the job's row could "
                                     "not be read: ") +
                             e.what()};
    }
    const CommitResolution res =
        resolve_interrupted({r.operation(), r.transition()}, row, clock_.now());
    spdlog::warn(
        "org={} job={} worker={}: commit interrupted by a lost connection, resolved "
        "from the row as {} ({})",
        r.org_id, job, r.worker_id,
        res.verdict == CommitResolution::Verdict::Applied      ? "applied"
        : res.verdict == CommitResolution::Verdict::NotApplied ? "not applied"
                                                               : "unknown",
        res.detail);
    switch (res.verdict) {
        case CommitResolution::Verdict::Applied: {
            store::Transition t;
            t.replayed = true;
            t.state = res.state;
            t.detail = res.detail;
            return t;
        }
        case CommitResolution::Verdict::NotApplied:
            return DbFailure{DbFailure::Kind::NotCommitted,
                             res.detail + "; nothing changed, safe to re-send"};
        case CommitResolution::Verdict::Unknown:
            break;
    }
    return DbFailure{DbFailure::Kind::OutcomeUnknown, res.detail};
}

}  // namespace aclaim::coordinator
