#include "worker/simulator.hpp"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>

namespace aclaim::worker {

namespace {

/// Signals and timers are looked at least this often, whatever the socket does.
constexpr Millis kMaxPollWait{100};
/// After a CLAIM answered with ERROR (overloaded, database unavailable, ...).
constexpr Millis kClaimRetryPause{500};
/// After a NO_WORK that came back well before its wait ended (draining, no database): keeps a
/// worker from spinning on instant answers.
constexpr Millis kEarlyNoWorkPause{200};

Millis until(TimePoint from, TimePoint to) {
    return to <= from ? Millis(0) : std::chrono::ceil<Millis>(to - from);
}

}  // namespace

Simulator::Simulator(zmq::context_t& context, WorkerOptions options, const std::atomic<bool>& stop)
    : options_(std::move(options)),
      stop_(stop),
      client_(context, options_.client),
      results_(options_.result_file),
      review_time_(options_.review_dist, options_.review_mean, std::random_device{}()),
      rng_(std::random_device{}()) {}

std::int64_t Simulator::org() const {
    return client_.welcome() ? client_.welcome()->org_id : options_.client.org_id;
}

int Simulator::run() {
    client_.start();
    last_work_ = client_.clock().monotonic_now();
    for (;;) {
        auto now = client_.clock().monotonic_now();
        if (!stopping_ && stop_.load()) begin_shutdown("signal", now);
        if (!stopping_ && options_.jobs > 0 && finished() >= options_.jobs)
            begin_shutdown("completed " + std::to_string(options_.jobs) + " jobs", now);
        if (!stopping_ && options_.idle_exit > Millis(0) && reviews_.empty() &&
            submitted_.empty() && saw_no_work_ && now - last_work_ >= options_.idle_exit)
            begin_shutdown("idle for " + std::to_string(options_.idle_exit.count()) + " ms", now);
        if (stopping_ && (client_.pending() == 0 || now >= stop_deadline_)) break;
        if (!stopping_) maybe_claim(now);

        const auto wait = std::min(kMaxPollWait, until(now, next_wake(now)));
        for (const auto& event : client_.poll(wait)) handle(event, client_.clock().monotonic_now());

        now = client_.clock().monotonic_now();
        if (crash_at_ && now >= *crash_at_) {
            spdlog::warn("worker={} crashing on purpose mid-review (--crash-after {} or --poison)",
                         options_.client.worker_id, options_.crash_after);
            spdlog::default_logger()->flush();
            ::kill(::getpid(), SIGKILL);
        }
        if (!stopping_) checkpoint_due_steps(now);
        if (!stopping_) finish_due_reviews(now);
    }
    client_.close();
    log_counters();
    return 0;
}

std::int32_t Simulator::claim_slots(TimePoint now, std::int64_t counted_twice) const {
    if (stopping_ || !client_.ready() || client_.claim_pending() || crash_at_ ||
        now < claim_not_before_)
        return 0;
    const auto busy =
        static_cast<std::int64_t>(reviews_.size() + submitted_.size()) - counted_twice;
    std::int64_t slots = options_.concurrency - busy;
    if (options_.jobs > 0) slots = std::min(slots, options_.jobs - finished() - busy);
    return static_cast<std::int32_t>(std::clamp<std::int64_t>(slots, 0, proto::kMaxClaimJobs));
}

void Simulator::maybe_claim(TimePoint now) {
    const auto slots = claim_slots(now, 0);
    if (slots <= 0) return;
    client_.claim(slots, options_.claim_wait_ms);
    claim_sent_at_ = now;
}

TimePoint Simulator::next_wake(TimePoint now) const {
    TimePoint next = now + kMaxPollWait;
    for (const auto& [key, r] : reviews_) {
        next = std::min(next, r.done_at);
        if (r.next_step) next = std::min(next, *r.next_step);
    }
    if (crash_at_) next = std::min(next, *crash_at_);
    if (claim_not_before_ > now) next = std::min(next, claim_not_before_);
    return next;
}

void Simulator::handle(const Event& event, TimePoint now) {
    if (const auto* a = std::get_if<JobAssigned>(&event)) {
        on_assigned(*a, now);
    } else if (const auto* lost = std::get_if<JobLost>(&event)) {
        on_lost(*lost, now);
    } else if (const auto* v = std::get_if<Verdict>(&event)) {
        on_verdict(*v, now);
    } else if (const auto* p = std::get_if<ProgressSaved>(&event)) {
        if (p->accepted) {
            spdlog::info("progress org={} job={} generation={} worker={} percent={} outcome=saved",
                         org(), p->job.job_id, p->job.generation, options_.client.worker_id,
                         p->percent);
        } else {
            spdlog::warn(
                "progress org={} job={} generation={} worker={} percent={} outcome=refused:{} "
                "({})",
                org(), p->job.job_id, p->job.generation, options_.client.worker_id, p->percent,
                p->reason, p->detail);
        }
    } else if (const auto* parked = std::get_if<JobParked>(&event)) {
        on_parked(*parked, now);
    } else if (const auto* c = std::get_if<ClaimEnded>(&event)) {
        if (c->why == ClaimEnded::Why::Error) {
            spdlog::warn("worker={} claim failed: {}", options_.client.worker_id, c->reason);
            claim_not_before_ = now + kClaimRetryPause;
        } else if (c->why == ClaimEnded::Why::NoWork) {
            saw_no_work_ = true;
            spdlog::debug("worker={} no work: {}", options_.client.worker_id, c->reason);
            if (now - claim_sent_at_ < Millis(options_.claim_wait_ms) / 2)
                claim_not_before_ = now + kEarlyNoWorkPause;
        }
    }
}

std::int32_t Simulator::resume_step(const JobAssigned& assigned) const {
    if (!assigned.resume) return 0;
    const std::string& checkpoint = assigned.resume->checkpoint;
    constexpr std::string_view kPrefix = "step=";
    if (!checkpoint.starts_with(kPrefix)) return 0;
    try {
        const int step = std::stoi(checkpoint.substr(kPrefix.size()));
        return std::clamp(step, 0, options_.checkpoint_steps);
    } catch (const std::exception&) {
        // Somebody else's checkpoint (another reviewer program): start over.
        return 0;
    }
}

void Simulator::on_assigned(const JobAssigned& assigned, TimePoint now) {
    const proto::AssignedJob& job = assigned.job;
    ++counters_.claimed;
    last_work_ = now;
    saw_no_work_ = false;
    const JobRef ref{job.job_id, job.generation};
    if (stopping_) {
        spdlog::info("release org={} job={} generation={} worker={}: assigned while stopping",
                     org(), job.job_id, job.generation, options_.client.worker_id);
        client_.release(ref);
        submitted_.insert(job.job_id);
        return;
    }
    const Millis duration = review_time_.sample();
    Review review{ref, now + duration, false};
    if (options_.checkpoint_steps > 0) {
        // The review is cut into steps; a job an earlier holder checkpointed resumes after the
        // last step it saved, so only the remaining steps take time.
        const std::int32_t steps = options_.checkpoint_steps;
        const std::int32_t from = resume_step(assigned);
        review.step = from;
        review.step_length = duration / steps;
        review.done_at = now + review.step_length * (steps - from);
        if (from + 1 < steps) review.next_step = now + review.step_length;
        if (assigned.resume) {
            spdlog::info(
                "resume org={} job={} generation={} worker={} checkpoint='{}' percent={} "
                "saved_by_generation={} from_step={}",
                org(), job.job_id, job.generation, options_.client.worker_id,
                assigned.resume->checkpoint, assigned.resume->percent, assigned.resume->generation,
                from);
        }
    }
    if (options_.stall > Millis(0) && !stall_used_) {
        stall_used_ = true;
        review.stalled = true;
        review.done_at = now + options_.stall;
        client_.stop_renewing(job.job_id);
        spdlog::warn(
            "stall org={} job={} generation={} worker={}: no heartbeats for {} ms, then "
            "completing anyway",
            org(), job.job_id, job.generation, options_.client.worker_id, options_.stall.count());
    }
    if (options_.crash_after >= 0 && counters_.completed_accepted >= options_.crash_after) {
        crash_at_ = now + duration / 2;
    }
    if (!options_.poison.empty() && job.payload == options_.poison) {
        // A poison job: whatever takes it dies mid-review, so it comes back until its attempts
        // are used up and it is discarded.
        spdlog::warn("worker={} took the poison job {}; crashing mid-review",
                     options_.client.worker_id, job.job_id);
        crash_at_ = now + duration / 2;
    }
    reviews_[{job.job_id, job.generation}] = review;
    spdlog::info("assigned org={} job={} generation={} worker={} attempts={} review_ms={}", org(),
                 job.job_id, job.generation, options_.client.worker_id, job.attempts,
                 until(now, review.done_at).count());
}

void Simulator::on_lost(const JobLost& lost, TimePoint now) {
    results_.write({options_.client.worker_id, lost.job.job_id, lost.job.generation, "review",
                    "revoked", false, "", lost.reason, lost.detail});
    const auto it = reviews_.find({lost.job.job_id, lost.job.generation});
    if (it == reviews_.end()) return;
    ++counters_.revoked;
    // A finished review is still reported: fencing makes a late result harmless and the
    // rejection is what an operator rehearsing a stall wants to see.
    if (it->second.stalled || it->second.done_at <= now) {
        spdlog::warn(
            "revoked org={} job={} generation={} worker={} reason={}: review already "
            "done or stalled, submitting anyway",
            org(), lost.job.job_id, lost.job.generation, options_.client.worker_id, lost.reason);
        return;
    }
    spdlog::warn("revoked org={} job={} generation={} worker={} reason={} ({}): review stopped",
                 org(), lost.job.job_id, lost.job.generation, options_.client.worker_id,
                 lost.reason, lost.detail);
    reviews_.erase(it);
}

void Simulator::checkpoint_due_steps(TimePoint now) {
    const std::int32_t steps = options_.checkpoint_steps;
    for (auto& [key, r] : reviews_) {
        // Up to the step before the last: the last one ends in the completion.
        while (r.next_step && *r.next_step <= now && !r.stalled) {
            ++r.step;
            const std::int32_t percent = r.step * 100 / steps;
            client_.progress(r.job, percent,
                             "step " + std::to_string(r.step) + " of " + std::to_string(steps),
                             "step=" + std::to_string(r.step));
            if (r.step + 1 < steps) {
                *r.next_step += r.step_length;
            } else {
                r.next_step.reset();
            }
        }
    }
}

void Simulator::finish_due_reviews(TimePoint now) {
    for (auto it = reviews_.begin(); it != reviews_.end();) {
        if (it->second.done_at > now) {
            ++it;
            continue;
        }
        submit(it->second, now);
        it = reviews_.erase(it);
    }
}

void Simulator::submit(const Review& r, TimePoint now) {
    submitted_.insert(r.job.job_id);
    if (r.stalled) stalled_job_ = r.job;
    const bool fail = !r.stalled && options_.fail_rate > 0 &&
                      std::bernoulli_distribution(options_.fail_rate)(rng_);
    if (fail) {
        client_.fail(r.job, "simulated review failure", true);
        return;
    }
    ++reviews_submitted_;
    if (!r.stalled && options_.park_every > 0 && reviews_submitted_ % options_.park_every == 0) {
        // Handed to an outside system: the token goes to --result-file when PARKED arrives, and
        // whatever finishes the job there (the callback or aclaim_finish_parked) uses it.
        client_.park(r.job, options_.park_timeout_ms, "parked by aclaim-worker --park-every");
        return;
    }
    std::string result = "review:" + options_.client.worker_id + ":" +
                         std::to_string(r.job.job_id) + ":" + std::to_string(r.job.generation);
    // The next claim rides on the completion (one message, one transaction where the
    // coordinator grants it). The job is still counted among the reviews as well as submitted.
    if (const auto slots = claim_slots(now, 1); slots > 0) {
        client_.complete_then_claim(r.job, std::move(result), slots, options_.claim_wait_ms);
        claim_sent_at_ = now;
        return;
    }
    client_.complete(r.job, std::move(result));
}

void Simulator::on_verdict(const Verdict& v, TimePoint now) {
    submitted_.erase(v.job.job_id);
    last_work_ = now;
    const auto op = to_string(v.op);
    const auto& id = options_.client.worker_id;
    if (v.accepted) {
        if (v.op == Verdict::Op::Complete) ++counters_.completed_accepted;
        if (v.op == Verdict::Op::Complete && v.replayed) ++counters_.replayed;
        if (v.op == Verdict::Op::Fail) ++counters_.failed_accepted;
        if (v.op == Verdict::Op::Release) ++counters_.released;
        spdlog::info("{} org={} job={} generation={} worker={} outcome=accepted state={}{}", op,
                     org(), v.job.job_id, v.job.generation, id, v.state,
                     v.replayed ? " replayed" : "");
    } else {
        ++counters_.rejected[v.reason];
        spdlog::warn("{} org={} job={} generation={} worker={} outcome=rejected:{} ({})", op, org(),
                     v.job.job_id, v.job.generation, id, v.reason, v.detail);
    }
    if (stalled_job_ == v.job) {
        spdlog::warn("stall rehearsal: {} after the stall was {}{}", op,
                     v.accepted ? "accepted" : "rejected: ", v.accepted ? "" : v.reason);
    }
    results_.write({id, v.job.job_id, v.job.generation, op, v.accepted ? "accepted" : "rejected",
                    v.replayed, v.state, v.reason, v.detail});
}

void Simulator::on_parked(const JobParked& p, TimePoint now) {
    last_work_ = now;
    const auto& id = options_.client.worker_id;
    if (!p.accepted) {
        // Still this worker's job (an ERROR), or already gone (REJECTED): completing it is right
        // in the first case and refused harmlessly in the second.
        ++counters_.rejected["park:" + p.reason];
        spdlog::warn(
            "park org={} job={} generation={} worker={} outcome=refused:{} ({}): "
            "completing it instead",
            org(), p.job.job_id, p.job.generation, id, p.reason, p.detail);
        results_.write({id, p.job.job_id, p.job.generation, "park", "rejected", false, "", p.reason,
                        p.detail});
        client_.complete(p.job, "review:" + id + ":" + std::to_string(p.job.job_id) + ":" +
                                    std::to_string(p.job.generation));
        return;
    }
    submitted_.erase(p.job.job_id);
    ++counters_.parked;
    spdlog::info(
        "park org={} job={} generation={} worker={} outcome=accepted deadline_us={} "
        "(its callback token is in the result file)",
        org(), p.job.job_id, p.job.generation, id, p.deadline_us);
    results_.write(
        {id, p.job.job_id, p.job.generation, "park", "accepted", false, "parked", "", p.token});
}

void Simulator::begin_shutdown(const std::string& why, TimePoint now) {
    stopping_ = true;
    crash_at_.reset();
    // Long enough for an outstanding long-poll and the releases to be answered; bounded so a
    // worker whose coordinator is gone still exits.
    stop_deadline_ = now + options_.client.reply_timeout + Millis(options_.claim_wait_ms);
    spdlog::info("worker={} stopping ({}): releasing {} held jobs", options_.client.worker_id, why,
                 reviews_.size());
    for (const auto& [key, r] : reviews_) {
        client_.release(r.job);
        submitted_.insert(r.job.job_id);
    }
    reviews_.clear();
}

void Simulator::log_counters() const {
    std::string rejected;
    for (const auto& [reason, n] : counters_.rejected)
        rejected += (rejected.empty() ? "" : ",") + reason + ":" + std::to_string(n);
    const auto& s = client_.stats();
    // The summary is printed even when the level hides per-job lines.
    spdlog::log(std::max(spdlog::level::info, spdlog::get_level()),
                "worker={} exit: claimed={} completed_accepted={} replayed={} failed_accepted={} "
                "released={} parked={} rejected={{{}}} revoked={} reconnects={} failovers={} "
                "resent={} errors={}",
                options_.client.worker_id, counters_.claimed, counters_.completed_accepted,
                counters_.replayed, counters_.failed_accepted, counters_.released, counters_.parked,
                rejected, counters_.revoked, s.reconnects, s.failovers, s.resent, s.errors);
}

}  // namespace aclaim::worker
