#include "drills/canary.d/poller.hpp"

#include <algorithm>

namespace aclaim::drills {

namespace {

using worker::Millis;
using worker::SteadyClock;
using worker::TimePoint;

/// Holds end and stop requests are looked at least this often.
constexpr Millis kMaxPollWait{20};
/// After a NO_WORK that came back well before its wait ended (a draining coordinator):
/// the same pause as the aclaim-worker simulator, so pollers press like real reviewers do.
constexpr Millis kEarlyNoWorkPause{200};
/// After a CLAIM ended by ERROR or a lost connection, as the simulator does.
constexpr Millis kClaimErrorPause{500};
/// How long a stopping poller waits for its last answers beyond an outstanding long-poll.
constexpr Millis kWindDown{5000};

double ms_between(TimePoint from, TimePoint to) {
    return std::chrono::duration<double, std::milli>(to - from).count();
}

worker::ClientOptions client_options(const PollerSettings& s) {
    worker::ClientOptions o;
    o.endpoints = {s.endpoint};
    o.worker_id = s.worker_id;
    o.org_id = s.org;
    o.queues = s.queues;
    o.curve = s.curve;
    return o;
}

}  // namespace

Poller::Poller(zmq::context_t& context, PollerSettings settings, Recorder& recorder,
               const std::atomic<int>& level, const std::atomic<bool>& stop)
    : settings_(std::move(settings)),
      recorder_(recorder),
      level_(level),
      stop_(stop),
      client_(context, client_options(settings_)) {}

void Poller::run() {
    try {
        client_.start();
        std::optional<TimePoint> wind_down_until;
        for (;;) {
            const auto now = SteadyClock::now();
            const bool stopping = stop_.load();
            if (stopping) {
                if (!wind_down_until) {
                    wind_down_until = now + kWindDown + Millis(settings_.claim_wait_ms);
                }
                if (held_ && !completing_) hold_until_ = now;
                if (!held_ && client_.pending() == 0) break;
                if (now >= *wind_down_until) {
                    failure_ = "no answer to its last requests within the wind-down";
                    break;
                }
            }
            if (held_ && !completing_ && now >= hold_until_) {
                client_.complete(*held_, "canary:" + settings_.worker_id + ":" +
                                             std::to_string(held_->job_id) + ":" +
                                             std::to_string(held_->generation));
                completing_ = true;
            }
            const bool active = !stopping && settings_.index < level_.load();
            if (active && client_.ready() && !held_ && !client_.claim_pending() &&
                now >= claim_not_before_) {
                client_.claim(1, settings_.claim_wait_ms);
                claim_sent_ = now;
            }
            Millis wait = kMaxPollWait;
            if (held_ && !completing_) {
                wait = std::clamp(std::chrono::ceil<Millis>(hold_until_ - now), Millis(0), wait);
            }
            for (const auto& event : client_.poll(wait)) handle(event, SteadyClock::now());
            const auto renewals = client_.stats().renewals;
            recorder_.renewals(renewals - renewals_seen_);
            renewals_seen_ = renewals;
        }
        client_.close();
    } catch (const std::exception& e) {
        failure_ = e.what();
    }
}

void Poller::handle(const worker::Event& event, TimePoint now) {
    if (const auto* a = std::get_if<worker::JobAssigned>(&event)) {
        const worker::JobRef job{a->job.job_id, a->job.generation};
        recorder_.assigned(ms_between(claim_sent_, now), job.job_id, job.generation,
                           settings_.index);
        if (held_) {
            // One job per claim and one claim at a time: a second job would be the coordinator's
            // mistake. It is counted above and finished at once so that nothing is left held.
            client_.complete(job, "canary:extra:" + std::to_string(job.job_id));
            return;
        }
        held_ = job;
        completing_ = false;
        hold_until_ = now + Millis(settings_.review_ms);
    } else if (const auto* c = std::get_if<worker::ClaimEnded>(&event)) {
        if (c->why == worker::ClaimEnded::Why::NoWork) {
            recorder_.no_work(c->reason);
            if (settings_.claim_wait_ms == 0 ||
                now - claim_sent_ < Millis(settings_.claim_wait_ms) / 2) {
                claim_not_before_ = now + kEarlyNoWorkPause;
            }
        } else {
            recorder_.claim_error();
            claim_not_before_ = now + kClaimErrorPause;
        }
    } else if (const auto* lost = std::get_if<worker::JobLost>(&event)) {
        recorder_.revoked(lost->reason);
        if (held_ == lost->job) {
            held_.reset();
            completing_ = false;
        }
    } else if (const auto* v = std::get_if<worker::Verdict>(&event)) {
        if (v->accepted) {
            recorder_.completed(v->replayed);
        } else {
            recorder_.rejected(v->reason);
        }
        if (held_ == v->job) {
            held_.reset();
            completing_ = false;
        }
    }
}

}  // namespace aclaim::drills
