#include "worker/held_jobs.hpp"

#include <algorithm>

namespace aclaim::worker {

void HeldJobs::add(JobRef job, Millis lease, TimePoint now) {
    Entry e;
    e.generation = job.generation;
    e.next_renewal = now + heartbeat_;
    e.renewal_sent = now;
    e.lease_deadline = now + lease;
    jobs_[job.job_id] = e;
}

bool HeldJobs::remove(JobRef job) {
    const auto it = jobs_.find(job.job_id);
    if (it == jobs_.end() || it->second.generation != job.generation) return false;
    jobs_.erase(it);
    return true;
}

bool HeldJobs::holds(JobRef job) const {
    const auto it = jobs_.find(job.job_id);
    return it != jobs_.end() && it->second.generation == job.generation;
}

std::vector<JobRef> HeldJobs::all() const {
    std::vector<JobRef> out;
    out.reserve(jobs_.size());
    for (const auto& [id, e] : jobs_) out.push_back({id, e.generation});
    return out;
}

void HeldJobs::stop_renewing(std::int64_t job_id) {
    if (const auto it = jobs_.find(job_id); it != jobs_.end()) it->second.renewing = false;
}

std::vector<JobRef> HeldJobs::take_due(TimePoint now) {
    return take_due(now, Millis(0));
}

std::vector<JobRef> HeldJobs::take_due(TimePoint now, Millis ahead) {
    std::vector<JobRef> due;
    const auto renewable = [](const Entry& e) { return e.renewing && !e.in_flight; };
    const bool any = std::any_of(jobs_.begin(), jobs_.end(), [&](const auto& kv) {
        return renewable(kv.second) && kv.second.next_renewal <= now;
    });
    if (!any) return due;
    for (auto& [id, e] : jobs_) {
        if (!renewable(e) || e.next_renewal > now + ahead) continue;
        e.in_flight = true;
        e.renewal_sent = now;
        e.next_renewal = now + heartbeat_;
        due.push_back({id, e.generation});
    }
    return due;
}

void HeldJobs::renewed(JobRef job, Millis lease) {
    const auto it = jobs_.find(job.job_id);
    if (it == jobs_.end() || it->second.generation != job.generation) return;
    it->second.in_flight = false;
    it->second.lease_deadline = it->second.renewal_sent + lease;
}

void HeldJobs::renewal_abandoned(std::int64_t job_id) {
    if (const auto it = jobs_.find(job_id); it != jobs_.end()) it->second.in_flight = false;
}

void HeldJobs::resume_renewing(std::int64_t job_id, TimePoint now) {
    if (const auto it = jobs_.find(job_id); it != jobs_.end()) {
        it->second.renewing = true;
        it->second.in_flight = false;
        it->second.next_renewal = now;
    }
}

void HeldJobs::retry_renewal(std::int64_t job_id, TimePoint at) {
    if (const auto it = jobs_.find(job_id); it != jobs_.end()) {
        it->second.in_flight = false;
        it->second.next_renewal = std::min(it->second.next_renewal, at);
    }
}

void HeldJobs::renew_all_now(TimePoint now) {
    for (auto& [id, e] : jobs_) {
        e.in_flight = false;
        e.next_renewal = now;
    }
}

std::optional<TimePoint> HeldJobs::next_due() const {
    std::optional<TimePoint> next;
    for (const auto& [id, e] : jobs_) {
        if (!e.renewing || e.in_flight) continue;
        if (!next || e.next_renewal < *next) next = e.next_renewal;
    }
    return next;
}

std::optional<TimePoint> HeldJobs::lease_deadline(std::int64_t job_id) const {
    const auto it = jobs_.find(job_id);
    if (it == jobs_.end()) return std::nullopt;
    return it->second.lease_deadline;
}

}  // namespace aclaim::worker
