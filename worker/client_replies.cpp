#include <spdlog/spdlog.h>

#include <stdexcept>

#include "common/base/overloaded.hpp"
#include "common/proto/wire_errors.hpp"
#include "worker/client.hpp"
#include "worker/client_internal.hpp"

namespace aclaim::worker {

using detail::terminal_op;

namespace {

/// The codec's codes: the message as a whole was refused, before anything it names was looked at.
bool codec_refusal(std::string_view code) {
    return code == proto::errors::kMalformed || code == proto::errors::kOversized ||
           code == proto::errors::kWrongVersion || code == proto::errors::kUnknownType ||
           code == proto::errors::kUndecodable || code == proto::errors::kInvalid;
}

/// A refusal's retry_after_ms (protocol 1.4), if it said one.
std::optional<Millis> retry_after(const proto::Error& e) {
    if (!e.retry_after_ms) return std::nullopt;
    return Millis(*e.retry_after_ms);
}

}  // namespace

void Client::handle(const proto::Message& message, TimePoint now, std::vector<Event>& out) {
    const auto take = [&](std::uint64_t req) -> std::optional<Pending> {
        const auto it = pending_.find(req);
        if (it == pending_.end()) return std::nullopt;
        auto p = std::move(it->second);
        pending_.erase(it);
        return p;
    };
    // The answer to a PROGRESS: ACCEPTED or REJECTED, told apart from a verdict by the request.
    const auto progress_saved = [&](std::uint64_t req, bool accepted, const std::string& reason,
                                    const std::string& detail) {
        const auto it = pending_.find(req);
        if (it == pending_.end()) return false;
        const auto* p = std::get_if<proto::Progress>(&it->second.message);
        if (p == nullptr) return false;
        out.push_back(
            ProgressSaved{{p->job_id, p->generation}, accepted, p->percent, reason, detail});
        pending_.erase(it);
        return true;
    };
    // The refusal of a PARK: REJECTED, told apart from a verdict by the request.
    const auto park_refused = [&](std::uint64_t req, const std::string& reason,
                                  const std::string& detail) {
        const auto it = pending_.find(req);
        if (it == pending_.end()) return false;
        const auto* p = std::get_if<proto::Park>(&it->second.message);
        if (p == nullptr) return false;
        // REJECTED says the job is no longer this worker's (its completion would be refused).
        held_.remove({p->job_id, p->generation});
        out.push_back(JobParked{{p->job_id, p->generation}, false, "", 0, reason, detail});
        pending_.erase(it);
        return true;
    };
    const auto verdict = [&](std::uint64_t req, bool accepted) -> std::optional<Verdict> {
        const auto p = take(req);
        const auto op = p ? terminal_op(p->message) : std::nullopt;
        if (!op) return std::nullopt;  // a late duplicate answer: already reported
        held_.remove(op->second);
        Verdict v;
        v.op = op->first;
        v.job = op->second;
        v.accepted = accepted;
        return v;
    };
    std::visit(base::Overloaded{
                   [&](const proto::Welcome& w) {
                       if (state_ == State::Greeting && w.req == hello_req_)
                           on_welcome(w, now, out);
                   },
                   [&](const proto::Assigned& a) {
                       take(a.req);
                       last_assigned_ = now;
                       // Jobs are taken even for a claim given up on: the coordinator granted them.
                       for (const auto& job : a.jobs) {
                           held_.add({job.job_id, job.generation}, Millis(job.lease_ms), now);
                           JobAssigned assigned{job};
                           for (const auto& r : a.resume) {
                               if (r.job_id == job.job_id) assigned.resume = r;
                           }
                           out.push_back(std::move(assigned));
                       }
                   },
                   [&](const proto::NoWork& n) {
                       take(n.req);
                       out.push_back(ClaimEnded{ClaimEnded::Why::NoWork, n.reason});
                   },
                   [&](const proto::LeaseMsg& l) {
                       take(l.req);
                       ++stats_.renewals;
                       held_.renewed({l.job_id, l.generation}, Millis(l.lease_ms));
                   },
                   [&](const proto::Revoked& r) {
                       if (r.req != 0) take(r.req);
                       ++stats_.revoked;
                       const JobRef job{r.job_id, r.generation};
                       if (held_.remove(job)) out.push_back(JobLost{job, r.reason, r.detail});
                   },
                   [&](const proto::Accepted& a) {
                       if (progress_saved(a.req, true, "", "")) return;
                       if (auto v = verdict(a.req, true)) {
                           v->replayed = a.replayed;
                           v->state = a.state;
                           out.push_back(std::move(*v));
                       }
                   },
                   [&](const proto::Parked& p) {
                       if (!take(p.req)) return;
                       const JobRef job{p.job_id, p.generation};
                       held_.remove(job);
                       out.push_back(JobParked{job, true, p.token, p.deadline_us, "", ""});
                   },
                   [&](const proto::Rejected& r) {
                       if (progress_saved(r.req, false, r.reason, r.detail)) return;
                       if (park_refused(r.req, r.reason, r.detail)) return;
                       if (auto v = verdict(r.req, false)) {
                           v->reason = r.reason;
                           v->detail = r.detail;
                           out.push_back(std::move(*v));
                       }
                   },
                   [&](const proto::Error& e) { handle_error(e, now, out); },
                   [&](const auto& m) {
                       spdlog::warn("worker={} ignored {} from the coordinator", options_.worker_id,
                                    proto::type_name(m));
                   },
               },
               message);
}

void Client::handle_error(const proto::Error& e, TimePoint now, std::vector<Event>& out) {
    ++stats_.errors;
    if (state_ == State::Greeting && e.req == hello_req_) {
        // A coordinator older than protocol 1.2 cannot read HELLO's features: greet it again
        // without them, and send every request alone.
        if (e.code == proto::errors::kUndecodable && asks_features()) {
            spdlog::info("worker={} {} does not read HELLO's features ({}); greeting it as 1.1",
                         options_.worker_id, endpoint(), e.text);
            features_refused_ = true;
            send_hello(now);
            return;
        }
        if (!proto::errors::retryable(e.code) && e.code != proto::errors::kDraining)
            throw std::runtime_error("coordinator refused HELLO: " + e.code + ": " + e.text);
        // Turned away for now by a coordinator that said when to come back (protocol 1.4): the
        // connection is kept, and HELLO said again on it then.
        if (e.retry_after_ms &&
            (e.code == proto::errors::kOverloaded || e.code == proto::errors::kTooManyRequests)) {
            state_ = State::BackingOff;
            reconnect_at_ = now + reconnect_wait(now, Millis(*e.retry_after_ms));
            spdlog::info("worker={} HELLO answered {}; saying it again in {} ms",
                         options_.worker_id, e.code, (reconnect_at_ - now) / Millis(1));
            return;
        }
        reconnect("HELLO answered " + e.code, Target::Next, now, out, retry_after(e));
        return;
    }
    // Our key was revoked: nothing this worker sends will be served again, and reconnecting
    // would only fail the handshake. The jobs it holds expire and are reclaimed.
    if (e.code == proto::errors::kKeyRevoked) {
        throw std::runtime_error("the coordinator cut this worker off: key_revoked: " + e.text);
    }
    // no_session: the coordinator restarted and ZeroMQ reconnected underneath us, so it is
    // alive; draining: it is going away, so another one serves next.
    if (e.code == proto::errors::kNoSession || e.code == proto::errors::kDraining) {
        reconnect("ERROR " + e.code + ": " + e.text,
                  e.code == proto::errors::kDraining ? Target::Next : Target::Same, now, out,
                  retry_after(e));
        return;
    }
    const auto it = pending_.find(e.req);
    if (it == pending_.end()) {
        spdlog::warn("worker={} ERROR {} for no pending request (req {}): {}", options_.worker_id,
                     e.code, e.req, e.text);
        return;
    }
    Pending& p = it->second;
    const auto op = terminal_op(p.message);
    if (op && proto::errors::retryable(e.code)) {
        p.retry_delay = p.retry_delay == Millis(0)
                            ? options_.retry_delay
                            : std::min(p.retry_delay * 2, options_.backoff_cap);
        if (e.retry_after_ms) p.retry_delay = std::max(p.retry_delay, Millis(*e.retry_after_ms));
        p.sent = false;
        p.due = now + p.retry_delay;
        spdlog::info("worker={} {} job={} generation={} answered ERROR {}; re-sending in {} ms",
                     options_.worker_id, to_string(op->first), op->second.job_id,
                     op->second.generation, e.code, p.retry_delay.count());
        return;
    }
    const auto message = std::move(p.message);
    pending_.erase(it);
    if (op) {
        held_.remove(op->second);
        out.push_back(Verdict{op->first, op->second, false, false, "", "error:" + e.code, e.text});
    } else if (std::holds_alternative<proto::Claim>(message)) {
        out.push_back(ClaimEnded{ClaimEnded::Why::Error, e.code + ": " + e.text});
    } else if (const auto* pr = std::get_if<proto::Progress>(&message)) {
        out.push_back(ProgressSaved{
            {pr->job_id, pr->generation}, false, pr->percent, "error:" + e.code, e.text});
    } else if (const auto* pk = std::get_if<proto::Park>(&message)) {
        // Not parked (or not known to be): the worker still holds the job, whose lease runs on.
        // Renewing it tells which: a job parked after all answers the RENEW with REVOKED.
        held_.resume_renewing(pk->job_id, now);
        out.push_back(
            JobParked{{pk->job_id, pk->generation}, false, "", 0, "error:" + e.code, e.text});
    } else if (const auto* r = std::get_if<proto::Renew>(&message)) {
        // Soon when the coordinator was only busy, else at the next heartbeat; a lease that is
        // really gone shows up as REVOKED.
        if (proto::errors::retryable(e.code))
            held_.retry_renewal(r->job_id, now + options_.retry_delay);
        else
            held_.renewal_abandoned(r->job_id);
        // A RENEW refused as a message (not decodable, out of range) has one ERROR for all the
        // jobs it named; a refusal of the session or the database answers each job itself.
        if (!r->held.empty() && codec_refusal(e.code)) {
            spdlog::warn("worker={} RENEW of {} jobs refused ({}: {}); renewing each alone",
                         options_.worker_id, r->held.size() + 1, e.code, e.text);
            renew_held_refused_ = true;
            for (const auto& h : r->held) {
                if (pending_.erase(h.req) > 0) held_.renewal_abandoned(h.job_id);
            }
        }
    }
}

void Client::on_welcome(const proto::Welcome& w, TimePoint now, std::vector<Event>& out) {
    state_ = State::Ready;
    welcome_ = w;
    renew_held_refused_ = false;
    // A coordinator that does not say (older than 1.4) keeps the last figure heard.
    if (w.sessions) fleet_ = w.sessions;
    backoff_.reset();
    held_.set_heartbeat(Millis(std::max(1, w.heartbeat_ms)));
    // Leases kept running while we were away: renew everything we still hold at once.
    if (had_session_) held_.renew_all_now(now);
    // In place: converting a temporary here trips a false maybe-uninitialized in gcc 12.
    out.emplace_back(std::in_place_type<SessionReady>, SessionReady{w, had_session_});
    spdlog::info("worker={} session at {} org={} lease_ms={} heartbeat_ms={}{}", options_.worker_id,
                 endpoint(), w.org_id, w.lease_ms, w.heartbeat_ms,
                 had_session_ ? " (reconnected)" : "");
    had_session_ = true;
    for (auto& [req, p] : pending_) {
        if (!p.sent && p.due <= now) send_pending(p, now);
    }
}

}  // namespace aclaim::worker
