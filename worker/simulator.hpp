#pragma once

// The reviewer simulator behind aclaim-worker: claims up to --concurrency jobs, "reviews" each
// for a sampled time, completes, fails or parks it, and rehearses the faults operators drill (crash
// mid-review, stall past the lease) and the outside completion of parked jobs. All protocol work is
// the Client's; this is the policy.

#include <atomic>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <utility>

#include "worker/client.hpp"
#include "worker/options.hpp"
#include "worker/result_log.hpp"
#include "worker/review_time.hpp"

namespace aclaim::worker {

struct SimulatorCounters {
    std::int64_t claimed = 0;             ///< jobs assigned to this worker
    std::int64_t completed_accepted = 0;  ///< including replayed acceptances
    std::int64_t replayed = 0;
    std::int64_t failed_accepted = 0;
    std::int64_t released = 0;
    std::int64_t revoked = 0;  ///< reviews stopped because the job was taken back
    std::int64_t parked = 0;   ///< reviews parked for an outside completion (--park-every)
    std::map<std::string, std::int64_t> rejected;  ///< by reason
};

class Simulator {
  public:
    /// `stop` is set by the owner's signal handler; the simulator then winds down cleanly.
    Simulator(zmq::context_t& context, WorkerOptions options, const std::atomic<bool>& stop);

    /// Runs until --jobs is reached, --idle-exit-ms passes without work, or `stop` is set;
    /// returns the process exit code. Throws when the coordinator refuses the session.
    int run();

    const SimulatorCounters& counters() const { return counters_; }

  private:
    struct Review {
        JobRef job;
        TimePoint done_at;
        bool stalled = false;  ///< rehearsing a stall: complete even after losing the job
        /// --checkpoint-steps: the steps done, and when the next one is.
        std::int32_t step = 0;
        Millis step_length{0};
        std::optional<TimePoint> next_step{};
    };

    /// How many jobs a claim sent now may ask for (0: none now), with `counted_twice` jobs
    /// counted both as under review and as submitted.
    std::int32_t claim_slots(TimePoint now, std::int64_t counted_twice) const;
    void maybe_claim(TimePoint now);
    void handle(const Event& event, TimePoint now);
    void on_assigned(const JobAssigned& assigned, TimePoint now);
    void on_lost(const JobLost& lost, TimePoint now);
    void on_verdict(const Verdict& v, TimePoint now);
    void on_parked(const JobParked& p, TimePoint now);
    /// Reviews done with for --jobs: accepted completions and accepted parks.
    std::int64_t finished() const { return counters_.completed_accepted + counters_.parked; }
    void finish_due_reviews(TimePoint now);
    /// --checkpoint-steps: reports the steps that ended by now, each with its checkpoint.
    void checkpoint_due_steps(TimePoint now);
    /// The step a job resumes at: the one its last holder's checkpoint ("step=K") names.
    std::int32_t resume_step(const JobAssigned& assigned) const;
    void submit(const Review& review, TimePoint now);
    void begin_shutdown(const std::string& why, TimePoint now);
    TimePoint next_wake(TimePoint now) const;
    void log_counters() const;
    std::int64_t org() const;

    WorkerOptions options_;
    const std::atomic<bool>& stop_;
    Client client_;
    ResultLog results_;
    ReviewTime review_time_;
    std::mt19937_64 rng_;
    /// Keyed by job and generation: a job reclaimed from a stalled review and claimed again by
    /// this same worker is a second review, and the stalled one must still be reported.
    std::map<std::pair<std::int64_t, std::int64_t>, Review> reviews_;
    std::set<std::int64_t> submitted_;  ///< COMPLETE/FAIL/RELEASE sent, verdict not yet back
    std::optional<JobRef> stalled_job_;
    SimulatorCounters counters_;
    std::int64_t reviews_submitted_ = 0;  ///< reviews ended so far, for --park-every
    bool stall_used_ = false;
    std::optional<TimePoint> crash_at_;
    TimePoint claim_not_before_{};
    TimePoint claim_sent_at_{};
    TimePoint last_work_{};
    bool saw_no_work_ = false;  ///< a NO_WORK since the last assignment: idle, not unreachable
    bool stopping_ = false;
    TimePoint stop_deadline_{};
};

}  // namespace aclaim::worker
