#include "coordinator/router/outcomes.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/base/overloaded.hpp"
#include "common/proto/wire_errors.hpp"

namespace aclaim::coordinator {

namespace {

struct JobRef {
    common::JobId job_id = 0;
    common::Generation generation = 0;
};

JobRef job_of(const RequestBody& body) {
    return std::visit(common::Overloaded{[](const proto::Claim&) { return JobRef{}; },
                                         [](const auto& m) {
                                             return JobRef{m.job_id, m.generation};
                                         }},
                      body);
}

/// NO_WORK reasons are read by people: "database unavailable" rather than the ERROR code.
std::string reason_text(std::string_view code) {
    std::string text(code);
    std::replace(text.begin(), text.end(), '_', ' ');
    return text;
}

}  // namespace

void Outcomes::process(std::deque<Event> events) {
    for (Event& event : events) {
        try {
            std::visit(common::Overloaded{
                           [this](RequestOutcome& o) { on_outcome(o); },
                           [this](common::Reclaimed& r) { on_reclaimed(r); },
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
                           },
                           [this](KeysRevoked& k) { p_.revocations.replace(k.keys); },
                       },
                       event);
        } catch (const std::exception& e) {
            spdlog::error("event not handled: {}", e.what());
        }
    }
}

void Outcomes::wake(std::vector<DbRequest> claims) {
    for (auto& claim : claims) {
        claim.wake_seq = p_.wakes.seq(claim.from.org_id);
        p_.dispatcher.dispatch(std::move(claim));
    }
}

void Outcomes::on_outcome(RequestOutcome& outcome) {
    DbRequest& request = outcome.request;
    if (!p_.dispatcher.returned(request)) {
        on_late(request, outcome.result);
    } else if (!request.answer) {
        on_internal(request, outcome.result);
    } else if (request.kind() == RequestKind::Claim) {
        on_claim(request, outcome.result);
    } else {
        on_transition(request, outcome.result);
    }
}

void Outcomes::observe_stages(const DbRequest& request) {
    const auto& t = request.timings;
    if (t.finished == SteadyClock::time_point{}) return;
    auto& stages = p_.metrics.claim_stages;
    stages[0].observe(t.taken - request.dispatched_at);
    stages[1].observe(t.finished - t.taken - t.commit);
    stages[2].observe(t.commit);
    stages[3].observe(LatencyClock::now() - t.finished);
}

void Outcomes::on_claim(DbRequest& request, const RequestOutcome::Result& result) {
    p_.metrics.claim_latency.observe(LatencyClock::now() - request.dispatched_at);
    const Requester& from = request.from;
    if (const auto* failure = std::get_if<Failure>(&result)) {
        spdlog::warn("claim org={} worker={} outcome={} ({})", from.org_id, from.worker_id,
                     failure->code, failure->text);
        p_.replier.answer_no_work(request, reason_text(failure->code));
        return;
    }
    const auto& outcome = std::get<common::ClaimOutcome>(result);
    if (p_.revocations.revoked(from.public_key)) {
        // The key was revoked while this claim ran: its jobs go back rather than to a worker
        // that may no longer complete them.
        if (outcome.status == common::ClaimOutcome::Status::Claimed) {
            release_undelivered(request, outcome);
        }
        p_.replier.send_error(
            from.routing_id, from.encoding, from.req, proto::errors::kKeyRevoked,
            "this connection's key has been revoked; nothing more is done for it");
        p_.replier.finish(from);
        return;
    }
    switch (outcome.status) {
        case common::ClaimOutcome::Status::Claimed: {
            proto::Assigned assigned;
            assigned.req = from.req;
            for (const auto& lease : outcome.leases) {
                assigned.jobs.push_back(proto::AssignedJob{
                    lease.job_id, lease.generation, common::to_micros(lease.lease_expires_at),
                    options_.lease_ms, lease.attempts, lease.priority, lease.payload});
                spdlog::info(
                    "claim org={} job={} generation={} worker={} outcome=assigned "
                    "attempt={}",
                    lease.org_id, lease.job_id, lease.generation, from.worker_id, lease.attempts);
            }
            p_.metrics.claims.fetch_add(1, std::memory_order_relaxed);
            p_.metrics.jobs_assigned.fetch_add(outcome.leases.size(), std::memory_order_relaxed);
            if (!p_.replier.send(from.routing_id, assigned, from.encoding)) {
                release_undelivered(request, outcome);
            }
            p_.replier.finish(from);
            observe_stages(request);
            return;
        }
        case common::ClaimOutcome::Status::NoWork: {
            const auto& claim = std::get<proto::Claim>(request.body);
            if (p_.dispatcher.draining()) {
                p_.replier.answer_no_work(request, std::string(proto::errors::kDraining));
            } else if (request.wait_until > p_.clock.monotonic_now()) {
                // A notification that arrived while this claim ran may be for a job the claim's
                // snapshot could not see: look again instead of waiting for the next one.
                const auto seq = p_.wakes.seq(from.org_id);
                if (seq != request.wake_seq) {
                    request.wake_seq = seq;
                    p_.dispatcher.dispatch(std::move(request));
                } else {
                    p_.metrics.parked.fetch_add(1, std::memory_order_relaxed);
                    p_.parked.park(std::move(request));
                }
            } else {
                p_.replier.answer_no_work(request,
                                          claim.wait_ms > 0 ? "wait ended" : "no pending jobs");
            }
            return;
        }
        case common::ClaimOutcome::Status::CandidateLocked:
        case common::ClaimOutcome::Status::LockTimeout:
            p_.replier.answer_no_work(request, reason_text(common::to_string(outcome.status)));
            return;
    }
}

void Outcomes::on_transition(const DbRequest& request, const RequestOutcome::Result& result) {
    const Requester& from = request.from;
    const auto [job, generation] = job_of(request.body);
    const auto op = kind_name(request.kind());
    if (const auto* failure = std::get_if<Failure>(&result)) {
        spdlog::warn("{} org={} job={} generation={} worker={} outcome=error:{} ({})", op,
                     from.org_id, job, generation, from.worker_id, failure->code, failure->text);
        p_.replier.send_error(from.routing_id, from.encoding, from.req, failure->code,
                              failure->text);
        p_.replier.finish(from);
        return;
    }
    const auto& t = std::get<common::Transition>(result);
    if (!t.accepted()) {
        const std::string reason(common::to_string(*t.rejection));
        p_.metrics.count_rejection(*t.rejection);
        spdlog::info("{} org={} job={} generation={} worker={} outcome=rejected:{} ({})", op,
                     from.org_id, job, generation, from.worker_id, reason, t.detail);
        if (request.kind() == RequestKind::Renew) {
            p_.metrics.revocations.fetch_add(1, std::memory_order_relaxed);
            p_.replier.send(from.routing_id,
                            proto::Revoked{from.req, job, generation, reason,
                                           proto::errors::clip_text(t.detail)},
                            from.encoding);
        } else {
            p_.replier.send(from.routing_id,
                            proto::Rejected{from.req, job, generation, reason,
                                            proto::errors::clip_text(t.detail)},
                            from.encoding);
        }
        p_.replier.finish(from);
        return;
    }
    if (request.kind() == RequestKind::Renew) {
        p_.metrics.renewals.fetch_add(1, std::memory_order_relaxed);
        spdlog::debug("renew org={} job={} generation={} worker={} outcome=extended", from.org_id,
                      job, generation, from.worker_id);
        p_.replier.send(from.routing_id,
                        proto::LeaseMsg{from.req, job, generation,
                                        common::to_micros(t.lease_expires_at), options_.lease_ms},
                        from.encoding);
        p_.replier.finish(from);
        return;
    }
    switch (request.kind()) {
        case RequestKind::Complete:
            p_.metrics.completions.fetch_add(1, std::memory_order_relaxed);
            break;
        case RequestKind::Fail:
            p_.metrics.failures.fetch_add(1, std::memory_order_relaxed);
            break;
        default:
            p_.metrics.releases.fetch_add(1, std::memory_order_relaxed);
            break;
    }
    if (t.replayed) p_.metrics.replayed.fetch_add(1, std::memory_order_relaxed);
    const std::string state(common::to_string(t.state));
    spdlog::info("{} org={} job={} generation={} worker={} outcome=accepted state={}{}", op,
                 from.org_id, job, generation, from.worker_id, state,
                 t.replayed ? " replayed" : "");
    p_.replier.send(from.routing_id, proto::Accepted{from.req, job, generation, state, t.replayed},
                    from.encoding);
    p_.replier.finish(from);
}

void Outcomes::on_internal(const DbRequest& request, const RequestOutcome::Result& result) {
    const auto [job, generation] = job_of(request.body);
    std::string outcome;
    if (const auto* failure = std::get_if<Failure>(&result)) {
        outcome = "error:" + failure->code + "; left to the reaper";
    } else if (const auto& t = std::get<common::Transition>(result); t.accepted()) {
        p_.metrics.releases.fetch_add(1, std::memory_order_relaxed);
        outcome = "released";
    } else {
        outcome = "rejected:" + std::string(common::to_string(*t.rejection));
    }
    spdlog::info(
        "release org={} job={} generation={} worker={} outcome={} (ASSIGNED could not "
        "be delivered)",
        request.from.org_id, job, generation, request.from.worker_id, outcome);
}

void Outcomes::on_late(const DbRequest& request, const RequestOutcome::Result& result) {
    const Requester& from = request.from;
    if (const auto* claim = std::get_if<common::ClaimOutcome>(&result)) {
        // The worker was told NO_WORK: these jobs must not wait a whole lease for the reaper.
        if (claim->status == common::ClaimOutcome::Status::Claimed) {
            spdlog::info(
                "claim org={} worker={}: {} jobs claimed after the deadline answer; "
                "releasing them",
                from.org_id, from.worker_id, claim->leases.size());
            release_undelivered(request, *claim);
        }
        return;
    }
    const auto [job, generation] = job_of(request.body);
    std::string outcome;
    if (const auto* failure = std::get_if<Failure>(&result)) {
        outcome = "error:" + failure->code;
    } else if (const auto& t = std::get<common::Transition>(result); t.accepted()) {
        outcome = "accepted";
    } else {
        outcome = "rejected:" + std::string(common::to_string(*t.rejection));
    }
    // Already answered at the deadline; the worker's re-send is judged against the row.
    spdlog::info("{} org={} job={} generation={} worker={} outcome={} (after the deadline answer)",
                 kind_name(request.kind()), from.org_id, job, generation, from.worker_id, outcome);
}

void Outcomes::release_undelivered(const DbRequest& claim, const common::ClaimOutcome& outcome) {
    // The worker will never hear of these jobs; giving them back now spares the queue a whole
    // lease of waiting for the reaper.
    for (const auto& lease : outcome.leases) {
        DbRequest release;
        release.from = claim.from;
        release.answer = false;
        release.body = proto::Release{0, lease.job_id, lease.generation};
        p_.dispatcher.dispatch(std::move(release));
    }
}

void Outcomes::on_reclaimed(const common::Reclaimed& reclaimed) {
    Session* session = p_.sessions.find_worker(reclaimed.org_id, reclaimed.assignee);
    if (session == nullptr) return;
    const std::string detail =
        reclaimed.reason == "cancelled" ? "the job was cancelled"
        : reclaimed.state == common::JobState::Discarded
            ? "lease expired on the job's last attempt; the job was discarded"
            : "lease expired; the job is " + std::string(common::to_string(reclaimed.state)) +
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
