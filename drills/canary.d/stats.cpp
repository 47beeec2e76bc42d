#include "drills/canary.d/stats.hpp"

#include <algorithm>

namespace aclaim::drills {

namespace {

void add_all(std::map<std::string, std::int64_t>& to,
             const std::map<std::string, std::int64_t>& from) {
    for (const auto& [k, v] : from) to[k] += v;
}

}  // namespace

LatencySummary summarize(std::vector<double> samples_ms) {
    LatencySummary s;
    if (samples_ms.empty()) return s;
    std::sort(samples_ms.begin(), samples_ms.end());
    s.count = samples_ms.size();
    s.p50_ms = quantile(samples_ms, 0.50);
    s.p90_ms = quantile(samples_ms, 0.90);
    s.p99_ms = quantile(samples_ms, 0.99);
    s.max_ms = samples_ms.back();
    return s;
}

void PollerCounts::add(const PollerCounts& o) {
    claim_ms.insert(claim_ms.end(), o.claim_ms.begin(), o.claim_ms.end());
    jobs_assigned += o.jobs_assigned;
    no_work += o.no_work;
    add_all(no_work_by_reason, o.no_work_by_reason);
    claim_errors += o.claim_errors;
    renewals += o.renewals;
    completions += o.completions;
    replayed += o.replayed;
    add_all(rejections_by_reason, o.rejections_by_reason);
    add_all(revocations_by_reason, o.revocations_by_reason);
    duplicate_assignments += o.duplicate_assignments;
    duplicate_evidence.insert(duplicate_evidence.end(), o.duplicate_evidence.begin(),
                              o.duplicate_evidence.end());
}

void Recorder::assigned(double round_trip_ms, std::int64_t job, std::int64_t generation,
                        int poller) {
    std::lock_guard lock(mutex_);
    current_.claim_ms.push_back(round_trip_ms);
    ++current_.jobs_assigned;
    const auto [it, fresh] = granted_.emplace(std::make_pair(job, generation), poller);
    if (!fresh) {
        ++current_.duplicate_assignments;
        current_.duplicate_evidence.push_back("job " + std::to_string(job) + " generation " +
                                              std::to_string(generation) + " assigned to poller " +
                                              std::to_string(it->second) + " and again to poller " +
                                              std::to_string(poller));
    }
}

void Recorder::no_work(const std::string& reason) {
    std::lock_guard lock(mutex_);
    ++current_.no_work;
    ++current_.no_work_by_reason[reason];
}

void Recorder::claim_error() {
    std::lock_guard lock(mutex_);
    ++current_.claim_errors;
}

void Recorder::renewals(std::int64_t n) {
    if (n == 0) return;
    std::lock_guard lock(mutex_);
    current_.renewals += n;
}

void Recorder::completed(bool replayed) {
    std::lock_guard lock(mutex_);
    ++current_.completions;
    if (replayed) ++current_.replayed;
}

void Recorder::rejected(const std::string& reason) {
    std::lock_guard lock(mutex_);
    ++current_.rejections_by_reason[reason];
}

void Recorder::revoked(const std::string& reason) {
    std::lock_guard lock(mutex_);
    ++current_.revocations_by_reason[reason];
}

PollerCounts Recorder::take() {
    std::lock_guard lock(mutex_);
    PollerCounts out = std::move(current_);
    current_ = PollerCounts{};
    return out;
}

}  // namespace aclaim::drills
