#pragma once

// The jobs a worker holds and when each one's lease must be renewed. Pure bookkeeping over
// steady-clock time points handed in by the caller, so it is tested without sockets or sleeps.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

namespace aclaim::worker {

using SteadyClock = std::chrono::steady_clock;
using TimePoint = SteadyClock::time_point;
using Millis = std::chrono::milliseconds;

/// A job as the worker names it to the coordinator.
struct JobRef {
    std::int64_t job_id = 0;
    std::int64_t generation = 0;
    bool operator==(const JobRef&) const = default;
};

class HeldJobs {
  public:
    /// Starts tracking a freshly assigned job; its first renewal is due one heartbeat from now.
    void add(JobRef job, Millis lease, TimePoint now);

    /// Stops tracking the job if it is held at that generation; false if it was not.
    bool remove(JobRef job);

    bool holds(JobRef job) const;
    std::size_t size() const { return jobs_.size(); }
    std::vector<JobRef> all() const;

    /// The renewal interval the coordinator asked for in WELCOME.
    void set_heartbeat(Millis heartbeat) { heartbeat_ = heartbeat; }
    Millis heartbeat() const { return heartbeat_; }

    /// No more renewals for this job: it is being completed, failed or released, or the worker
    /// rehearses a stall. The job stays held until its verdict.
    void stop_renewing(std::int64_t job_id);

    /// Jobs whose renewal is due and not already in flight; each is marked in flight and its
    /// next renewal scheduled one heartbeat after `now`.
    std::vector<JobRef> take_due(TimePoint now);
    /// As take_due, but once any renewal is due, also the renewable jobs due within `ahead`:
    /// for one RENEW that names them all (protocol 1.3). Renewing a job early only extends its
    /// lease from now, and jobs taken together stay due together, so the held jobs fall into
    /// one heartbeat within one interval (each pair of them is due within half an interval of
    /// each other one way round, with `ahead` half of it).
    std::vector<JobRef> take_due(TimePoint now, Millis ahead);

    /// A LEASE arrived: the lease now runs `lease` from when the renewal was sent, which is
    /// never later than when the coordinator extended it.
    void renewed(JobRef job, Millis lease);

    /// The renewal got no answer (the connection is being replaced): allow another one.
    void renewal_abandoned(std::int64_t job_id);

    /// Renewals again, the first one now, for a job whose stop_renewing() was premature: its
    /// PARK was refused with an ERROR, so the worker still holds it.
    void resume_renewing(std::int64_t job_id, TimePoint now);

    /// The renewal was refused for now (coordinator busy): try again at `at` at the latest.
    void retry_renewal(std::int64_t job_id, TimePoint at);

    /// After a reconnect every renewable job is renewed at once: its lease kept running while
    /// the worker was away.
    void renew_all_now(TimePoint now);

    /// When the next renewal falls due, if any job is renewable.
    std::optional<TimePoint> next_due() const;

    /// The worker's own conservative estimate of when the job's lease ends.
    std::optional<TimePoint> lease_deadline(std::int64_t job_id) const;

  private:
    struct Entry {
        std::int64_t generation = 0;
        TimePoint next_renewal;
        TimePoint renewal_sent;
        TimePoint lease_deadline;
        bool in_flight = false;
        bool renewing = true;
    };

    std::map<std::int64_t, Entry> jobs_;
    Millis heartbeat_{10000};
};

}  // namespace aclaim::worker
