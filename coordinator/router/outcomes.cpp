#include "coordinator/router/outcomes.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/base/overloaded.hpp"
#include "common/proto/wire_errors.hpp"

namespace aclaim::coordinator {

namespace {

/// The state ACCEPTED names (docs/protocol.md, the ACCEPTED row): `completed`, `failed`, `pending`
/// or `assigned`. Protocol 1.1 promised that scheduling, backoff and discarding show to a worker
/// only as rejection reasons, so a job waiting out its backoff is `pending` and one whose last
/// attempt was used is `failed`: it will not come back, which is all its reviewer can act on.
/// `aclaimctl inspect` and the SQL API tell the two apart.
std::string_view wire_state(store::JobState state) {
    switch (state) {
        case store::JobState::Scheduled:
            return store::to_string(store::JobState::Pending);
        case store::JobState::Discarded:
            return store::to_string(store::JobState::Failed);
        default:
            return store::to_string(state);
    }
}

}  // namespace

void Outcomes::process(std::deque<Event> events) {
    for (Event& event : events) {
        try {
            std::visit(base::Overloaded{
                           [this](RequestOutcome& o) { on_outcome(o); },
                           [this](store::Reclaimed& r) { on_reclaimed(r); },
                           [this](OrgWoken& w) {
                               p_.wakes.org_woken(w.org_id);
                               if (!p_.dispatcher.draining()) {
                                   wake(p_.parked.take_org(w.org_id, w.queue));
                               }
                           },
                           [this](ListenerReady&) {
                               // Anything sent while nobody listened is lost: look again once.
                               p_.wakes.listener_ready();
                               if (!p_.dispatcher.draining()) wake(p_.parked.take_all());
                               p_.metrics.listener_starts.fetch_add(1, std::memory_order_relaxed);
                           },
                           [this](KeysRevoked& k) { p_.revocations.replace(k.keys); },
                       },
                       event);
        } catch (const std::exception& e) {
            spdlog::error("event not handled: {}", e.what());
        }
    }
}

void Outcomes::refilled(std::vector<RoutedRequest> claims) {
    if (claims.empty()) return;
    if (p_.dispatcher.draining()) {
        for (auto& claim : claims) {
            p_.replier.answer_no_work(claim, std::string(proto::errors::kDraining));
        }
        return;
    }
    wake(std::move(claims));
}

void Outcomes::wake(std::vector<RoutedRequest> claims) {
    for (auto& claim : claims) {
        p_.wakes.stamp(claim);
        p_.dispatcher.dispatch(std::move(claim));
    }
}

void Outcomes::slot_freed(store::OrgId org, const std::string& queue) {
    p_.wakes.slot_freed(org, queue);
    if (p_.dispatcher.draining()) return;
    if (auto claim = p_.parked.take_slot_bound(org, queue)) {
        std::vector<RoutedRequest> one;
        one.push_back(std::move(*claim));
        wake(std::move(one));
    }
}

void Outcomes::on_outcome(RequestOutcome& outcome) {
    DbRequest& request = outcome.request;
    // A lease ended here, answered or not: a claim held back by its queue's concurrency limit
    // may take the slot now.
    if (const auto* t = std::get_if<store::Transition>(&outcome.result);
        t != nullptr && t->accepted() && !t->queue.empty()) {
        slot_freed(request.ask.org_id, t->queue);
    }
    const bool own = !request.answer;
    auto routed = p_.dispatcher.returned(request);
    if (own) {
        on_internal(request.ask, outcome.result);
    } else if (!routed) {
        on_late(request.ask, outcome.result);
    } else if (routed->kind() == RequestKind::Claim) {
        on_claim(*routed, outcome.result);
    } else {
        on_transition(*routed, outcome.result);
    }
}

void Outcomes::observe_stages(const DbRequest& request) {
    const auto& t = request.timings;
    if (t.finished == SteadyClock::time_point{}) return;
    using Stage = Metrics::ClaimStage;
    auto& stages = p_.metrics.claim_stages;
    stages[Stage::QueueWait].observe(t.taken - request.dispatched_at);
    stages[Stage::Statement].observe(t.finished - t.taken - t.commit);
    stages[Stage::Commit].observe(t.commit);
    stages[Stage::Reply].observe(LatencyClock::now() - t.finished);
}

void Outcomes::on_claim(RoutedRequest& request, const RequestOutcome::Result& result) {
    p_.metrics.claim_latency.observe(LatencyClock::now() - request.db.dispatched_at);
    const ReplyTo& to = request.reply;
    const StoreRequest& from = request.ask();
    if (const auto* failure = std::get_if<DbFailure>(&result)) {
        spdlog::warn("claim org={} worker={} outcome={} ({})", from.org_id, from.worker_id,
                     Replier::wire_code(failure->kind), failure->text);
        p_.replier.answer_failure(request, *failure);
        return;
    }
    const auto& outcome = std::get<store::ClaimOutcome>(result);
    if (p_.revocations.revoked(to.public_key)) {
        // The key was revoked while this claim ran: its jobs go back rather than to a worker
        // that may no longer complete them.
        if (outcome.status == store::ClaimOutcome::Status::Claimed) {
            release_undelivered(from, outcome);
        }
        p_.replier.send_error(
            to.routing_id, to.encoding, to.req, proto::errors::kKeyRevoked,
            "this connection's key has been revoked; nothing more is done for it");
        p_.replier.finish(to);
        return;
    }
    switch (outcome.status) {
        case store::ClaimOutcome::Status::Claimed: {
            proto::Assigned assigned;
            assigned.req = to.req;
            const Session* session = p_.sessions.find(to.routing_id);
            const bool resumable = session != nullptr && session->progress;
            for (const auto& lease : outcome.leases) {
                assigned.jobs.push_back(proto::AssignedJob{
                    lease.job_id, lease.generation, base::to_micros(lease.lease_expires_at),
                    options_.lease_ms, lease.attempts, lease.priority, lease.payload});
                if (resumable && lease.resume) {
                    const auto& r = *lease.resume;
                    assigned.resume.push_back(proto::ResumeFrom{lease.job_id, r.generation,
                                                                r.percent, r.note, r.checkpoint});
                }
                spdlog::info(
                    "claim org={} job={} generation={} worker={} outcome=assigned "
                    "attempt={}",
                    lease.org_id, lease.job_id, lease.generation, from.worker_id, lease.attempts);
            }
            p_.metrics.claims.fetch_add(1, std::memory_order_relaxed);
            p_.metrics.jobs_assigned.fetch_add(outcome.leases.size(), std::memory_order_relaxed);
            if (!p_.replier.send(to.routing_id, assigned, to.encoding)) {
                release_undelivered(from, outcome);
            }
            p_.replier.finish(to);
            observe_stages(request.db);
            return;
        }
        case store::ClaimOutcome::Status::NoWork: {
            if (p_.dispatcher.draining()) {
                p_.replier.answer_no_work(request, std::string(proto::errors::kDraining));
            } else if (request.wait_until > p_.clock.monotonic_now() &&
                       p_.sessions.find(request.reply.routing_id) == nullptr) {
                // Its connection closed (or said BYE) while the claim was at the database:
                // nobody is left to answer, and a claim parked now would hold a place of its
                // organization's parked-claim limit until its wait ends.
                return;
            } else if (request.wait_until > p_.clock.monotonic_now()) {
                // A notification that arrived while this claim ran may be for a job the claim's
                // snapshot could not see, and a lease that ended meanwhile on a served queue with
                // a concurrency limit may have freed the slot it waits for: look again instead of
                // waiting for the next one.
                const auto seq = p_.wakes.seq(from.org_id);
                request.slot_bound = outcome.slot_bound;
                const bool freed_meanwhile =
                    request.slot_bound &&
                    p_.wakes.slots(from.org_id, from.queues) != request.slot_seq;
                // Held back by a rate limit: look again when its bucket has a token, on the
                // monotonic clock (the store said when on the wall clock, both the injected one's).
                request.retry_at.reset();
                if (outcome.refill_at) {
                    request.retry_at =
                        p_.clock.monotonic_now() +
                        std::max(base::Duration{0}, *outcome.refill_at - p_.clock.now());
                }
                if (seq != request.wake_seq || freed_meanwhile ||
                    (request.retry_at && *request.retry_at <= p_.clock.monotonic_now())) {
                    p_.wakes.stamp(request);
                    request.retry_at.reset();
                    p_.dispatcher.dispatch(std::move(request));
                } else {
                    p_.metrics.parked.fetch_add(1, std::memory_order_relaxed);
                    p_.parked.park(std::move(request));
                }
            } else {
                p_.replier.answer_no_work(request,
                                          request.wait_ms > 0 ? "wait ended" : "no pending jobs");
            }
            return;
        }
    }
}

void Outcomes::on_transition(const RoutedRequest& request, const RequestOutcome::Result& result) {
    const ReplyTo& to = request.reply;
    const StoreRequest& from = request.ask();
    const store::JobId job = from.job_id;
    const store::Generation generation = from.generation;
    const auto op = kind_name(request.kind());
    if (const auto* failure = std::get_if<DbFailure>(&result)) {
        spdlog::warn("{} org={} job={} generation={} worker={} outcome=error:{} ({})", op,
                     from.org_id, job, generation, from.worker_id,
                     Replier::wire_code(failure->kind), failure->text);
        p_.replier.answer_failure(request, *failure);
        return;
    }
    const auto& t = std::get<store::Transition>(result);
    if (!t.accepted()) {
        const std::string reason(store::to_string(*t.rejection));
        p_.metrics.count_rejection(*t.rejection);
        spdlog::info("{} org={} job={} generation={} worker={} outcome=rejected:{} ({})", op,
                     from.org_id, job, generation, from.worker_id, reason, t.detail);
        if (request.kind() == RequestKind::Renew) {
            p_.metrics.revocations.fetch_add(1, std::memory_order_relaxed);
            p_.replier.send(
                to.routing_id,
                proto::Revoked{to.req, job, generation, reason, proto::errors::clip_text(t.detail)},
                to.encoding);
        } else {
            p_.replier.send(to.routing_id,
                            proto::Rejected{to.req, job, generation, reason,
                                            proto::errors::clip_text(t.detail)},
                            to.encoding);
        }
        p_.replier.finish(to);
        return;
    }
    if (request.kind() == RequestKind::Park) {
        p_.metrics.jobs_parked.fetch_add(1, std::memory_order_relaxed);
        spdlog::info("park org={} job={} generation={} worker={} outcome=parked deadline={}",
                     from.org_id, job, generation, from.worker_id,
                     base::to_micros(t.lease_expires_at));
        p_.replier.send(
            to.routing_id,
            proto::Parked{to.req, job, generation, from.token, base::to_micros(t.lease_expires_at)},
            to.encoding);
        p_.replier.finish(to);
        return;
    }
    if (request.kind() == RequestKind::Renew) {
        p_.metrics.renewals.fetch_add(1, std::memory_order_relaxed);
        spdlog::debug("renew org={} job={} generation={} worker={} outcome=extended", from.org_id,
                      job, generation, from.worker_id);
        p_.replier.send(to.routing_id,
                        proto::LeaseMsg{to.req, job, generation,
                                        base::to_micros(t.lease_expires_at), options_.lease_ms},
                        to.encoding);
        p_.replier.finish(to);
        return;
    }
    switch (request.kind()) {
        case RequestKind::Complete:
            p_.metrics.completions.fetch_add(1, std::memory_order_relaxed);
            break;
        case RequestKind::Fail:
            p_.metrics.failures.fetch_add(1, std::memory_order_relaxed);
            break;
        case RequestKind::Progress:
            p_.metrics.progress_reports.fetch_add(1, std::memory_order_relaxed);
            break;
        default:
            p_.metrics.releases.fetch_add(1, std::memory_order_relaxed);
            break;
    }
    if (t.replayed) p_.metrics.replayed.fetch_add(1, std::memory_order_relaxed);
    spdlog::info("{} org={} job={} generation={} worker={} outcome=accepted state={}{}", op,
                 from.org_id, job, generation, from.worker_id, store::to_string(t.state),
                 t.replayed ? " replayed" : "");
    const std::string state(wire_state(t.state));
    p_.replier.send(to.routing_id, proto::Accepted{to.req, job, generation, state, t.replayed},
                    to.encoding);
    p_.replier.finish(to);
}

void Outcomes::on_internal(const StoreRequest& request, const RequestOutcome::Result& result) {
    std::string outcome;
    if (const auto* failure = std::get_if<DbFailure>(&result)) {
        outcome =
            "error:" + std::string(Replier::wire_code(failure->kind)) + "; left to the reaper";
    } else if (const auto& t = std::get<store::Transition>(result); t.accepted()) {
        p_.metrics.releases.fetch_add(1, std::memory_order_relaxed);
        outcome = "released";
    } else {
        outcome = "rejected:" + std::string(store::to_string(*t.rejection));
    }
    spdlog::info(
        "release org={} job={} generation={} worker={} outcome={} (ASSIGNED could not "
        "be delivered)",
        request.org_id, request.job_id, request.generation, request.worker_id, outcome);
}

void Outcomes::on_late(const StoreRequest& request, const RequestOutcome::Result& result) {
    if (const auto* claim = std::get_if<store::ClaimOutcome>(&result)) {
        // The worker was told NO_WORK: these jobs must not wait a whole lease for the reaper.
        if (claim->status == store::ClaimOutcome::Status::Claimed) {
            spdlog::info(
                "claim org={} worker={}: {} jobs claimed after the deadline answer; "
                "releasing them",
                request.org_id, request.worker_id, claim->leases.size());
            release_undelivered(request, *claim);
        }
        return;
    }
    std::string outcome;
    if (const auto* failure = std::get_if<DbFailure>(&result)) {
        outcome = "error:" + std::string(Replier::wire_code(failure->kind));
    } else if (const auto& t = std::get<store::Transition>(result); t.accepted()) {
        outcome = "accepted";
    } else {
        outcome = "rejected:" + std::string(store::to_string(*t.rejection));
    }
    // Already answered at the deadline; the worker's re-send is judged against the row.
    spdlog::info("{} org={} job={} generation={} worker={} outcome={} (after the deadline answer)",
                 kind_name(request.kind), request.org_id, request.job_id, request.generation,
                 request.worker_id, outcome);
}

void Outcomes::release_undelivered(const StoreRequest& claim, const store::ClaimOutcome& outcome) {
    // The worker will never hear of these jobs; giving them back now spares the queue a whole
    // lease of waiting for the reaper.
    for (const auto& lease : outcome.leases) {
        p_.dispatcher.dispatch_own(StoreRequest::release_of(claim.org_id, claim.worker_id, lease));
    }
}

void Outcomes::on_reclaimed(const store::Reclaimed& reclaimed) {
    if (!reclaimed.queue.empty()) slot_freed(reclaimed.org_id, reclaimed.queue);
    Session* session = p_.sessions.find_worker(reclaimed.org_id, reclaimed.assignee);
    if (session == nullptr) return;
    const std::string detail =
        reclaimed.reason == "cancelled" ? "the job was cancelled"
        : reclaimed.state == store::JobState::Discarded
            ? "lease expired on the job's last attempt; the job was discarded"
            : "lease expired; the job is " + std::string(store::to_string(reclaimed.state)) +
                  " again";
    const bool pushed = p_.replier.send(
        session->routing_id,
        proto::Revoked{0, reclaimed.job_id, reclaimed.generation, reclaimed.reason, detail},
        session->encoding);
    if (pushed) p_.metrics.revocations.fetch_add(1, std::memory_order_relaxed);
    spdlog::info("revoke org={} job={} generation={} worker={} outcome={}", reclaimed.org_id,
                 reclaimed.job_id, reclaimed.generation, reclaimed.assignee,
                 pushed ? "pushed" : "undeliverable");
}

}  // namespace aclaim::coordinator
