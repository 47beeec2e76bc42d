#pragma once

// A reviewer's connection to a coordinator: one DEALER socket, the session (HELLO/WELCOME),
// pipelined requests matched by id, lease renewals at the coordinator's heartbeat interval, and
// reconnection with backoff that re-sends only what is safe to re-send. Given several coordinator
// endpoints it fails over between them: a coordinator that died, stopped answering the
// transport's PINGs or left a request unanswered is left for the next one, and the jobs held are
// renewed there (the lease is in the row, not in the coordinator). Single-threaded: the owner
// calls poll() in its loop and reacts to the events it returns.

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <variant>
#include <vector>
#include <zmq.hpp>

#include "common/base/backoff.hpp"
#include "common/base/clock.hpp"
#include "common/proto/protocol.hpp"
#include "worker/held_jobs.hpp"
#include "worker/socket_monitor.hpp"

namespace aclaim::worker {

/// CURVE keys in Z85 text; all empty means plaintext.
struct CurveKeys {
    std::string server_public;
    std::string client_public;
    std::string client_secret;
    bool enabled() const { return !server_public.empty(); }
};

struct ClientOptions {
    /// The coordinators that serve this worker's organization (its cell), at least one. The
    /// client takes them in an order of its own, shuffled once, starting at the first: the
    /// workers of a coordinator that dies spread over the others.
    std::vector<std::string> endpoints{"tcp://127.0.0.1:5555"};
    std::string worker_id;
    /// Sent in HELLO; only a plaintext coordinator uses it.
    std::int64_t org_id = 0;
    /// The queues served (HELLO's queues, protocol 1.1); empty: "default" only.
    std::vector<std::string> queues;
    proto::Encoding encoding = proto::Encoding::Binary;
    /// A request unanswered this long (beyond a claim's own wait) means the coordinator is gone.
    Millis reply_timeout{5000};
    /// A coordinator whose end of the connection answers nothing, not even the transport's
    /// PINGs (sent every third of this), this long is given up: a hung process or a dead route.
    /// A coordinator that dies outright is noticed at once, when its connection drops.
    Millis silence_timeout{3000};
    /// Seeds the endpoint order and the back-off jitter; 0: a random seed.
    std::uint64_t seed = 0;
    Millis backoff_first{100};
    Millis backoff_cap{5000};
    /// Pause before re-sending a request the coordinator could not carry out (e.g. ERROR
    /// outcome_unknown or database_unavailable), doubled per retry of that request up to the cap.
    Millis retry_delay{200};
    /// Requests awaiting a reply at once; more wait their turn. The coordinator refuses requests
    /// beyond its own per-session limit (64 by default) with ERROR too_many_requests.
    std::size_t max_in_flight = 32;
    CurveKeys curve;
    /// Ask for protocol 1.2's COMPLETE that carries the next CLAIM (HELLO's features); used by
    /// complete_then_claim() when the coordinator grants it. Off: every request goes alone, as
    /// against a 1.1 coordinator.
    bool complete_claim = true;
    /// Ask for protocol 1.3's RENEW that names every held job (HELLO's features): where the
    /// coordinator grants it, one RENEW per heartbeat renews them all. Off, or against an older
    /// coordinator: one RENEW per held job.
    bool renew_held = true;
    /// Ask for protocol 1.4's reconnect hints (HELLO's features): WELCOME's `sessions` sizes the
    /// window the first reconnection after a loss is spread over, and a refusal's
    /// retry_after_ms is waited out (docs/protocol.md, "Reconnecting a fleet").
    bool reconnect_hints = true;
    /// Ask for protocol 1.5's progress (HELLO's features): ASSIGNED then carries the progress an
    /// earlier holder of a job saved (JobAssigned::resume), and progress() is answered.
    bool progress = true;
    /// Ask for protocol 1.6's park (HELLO's features): park() is answered PARKED. Off unless the
    /// worker parks jobs.
    bool park = false;
};

// ---- events returned by Client::poll ----

/// WELCOME arrived: the session is open (again, when `reconnected`).
struct SessionReady {
    proto::Welcome welcome;
    bool reconnected = false;
};

/// A job granted by ASSIGNED. The client renews it until complete/fail/release or a revocation.
struct JobAssigned {
    proto::AssignedJob job;
    /// Protocol 1.5: the last progress an earlier holder saved on this job (its checkpoint is
    /// what to resume from), when one did and the session granted proto::kFeatureProgress.
    std::optional<proto::ResumeFrom> resume{};
};

/// A CLAIM ended without jobs: NO_WORK, an ERROR, or its reply was lost with the connection.
struct ClaimEnded {
    enum class Why { NoWork, Error, ConnectionLost };
    Why why = Why::NoWork;
    std::string reason;
};

/// The worker no longer holds the job (REVOKED, pushed or in answer to RENEW): stop working.
struct JobLost {
    JobRef job;
    std::string reason;
    std::string detail;
};

/// The answer to COMPLETE, FAIL or RELEASE.
struct Verdict {
    enum class Op { Complete, Fail, Release };
    Op op = Op::Complete;
    JobRef job;
    bool accepted = false;
    bool replayed = false;  ///< ACCEPTED for a commit that had already happened
    std::string state;      ///< when accepted: the job's state afterwards
    std::string reason;     ///< when refused: a rejection name, or "error:<code>"
    std::string detail;
};

/// The answer to progress(): stored (ACCEPTED), or refused (REJECTED, as a completion of the
/// same generation would be, or an ERROR: `reason` is then "error:<code>"). A report is not
/// re-sent, after an ERROR or a lost connection alike: the next one supersedes it.
struct ProgressSaved {
    JobRef job;
    bool accepted = false;
    std::int32_t percent = 0;
    std::string reason;
    std::string detail;
};

/// The answer to park() (protocol 1.6): PARKED with the callback token and the deadline (the
/// client no longer holds the job), or refused (REJECTED as a completion of the same generation
/// would be, or an ERROR: `reason` is then "error:<code>").
struct JobParked {
    JobRef job;
    bool accepted = false;
    std::string token;             ///< when accepted: hand it to the outside system
    std::int64_t deadline_us = 0;  ///< when accepted: the park's deadline
    std::string reason;
    std::string detail;
};

using Event =
    std::variant<SessionReady, JobAssigned, ClaimEnded, JobLost, Verdict, ProgressSaved, JobParked>;

std::string_view to_string(Verdict::Op op);

struct ClientStats {
    std::int64_t reconnects = 0;
    std::int64_t failovers = 0;  ///< reconnections that moved to another endpoint
    std::int64_t resent = 0;     ///< COMPLETE/FAIL/RELEASE sent again after a lost reply or ERROR
    std::int64_t renewals = 0;
    std::int64_t revoked = 0;
    std::int64_t errors = 0;  ///< ERROR replies received
};

class Client {
  public:
    /// Deadlines, renewals and back-off run on the system's monotonic time.
    Client(zmq::context_t& context, ClientOptions options);
    /// The clock's monotonic time drives every deadline, renewal and back-off; it must outlive
    /// the client.
    Client(zmq::context_t& context, ClientOptions options, const base::Clock& clock);

    /// Opens the socket and sends HELLO; the session is ready when poll() reports SessionReady.
    void start();

    /// Requests return their id. Requests made while no session is open wait until it opens.
    std::uint64_t claim(std::int32_t max_jobs, std::int32_t wait_ms);
    std::uint64_t complete(JobRef job, std::string result_ref);
    /// COMPLETE and the next CLAIM: one message, answered ACCEPTED (or REJECTED) and then
    /// ASSIGNED or NO_WORK, one transaction at the coordinator, where the session grants
    /// proto::kFeatureCompleteClaim; otherwise the two requests go out one after the other.
    /// Returns the ids of the completion and of the claim.
    std::pair<std::uint64_t, std::uint64_t> complete_then_claim(JobRef job, std::string result_ref,
                                                                std::int32_t max_jobs,
                                                                std::int32_t wait_ms);
    /// Whether the open session granted a feature of protocol 1.2 or later (WELCOME's features).
    bool granted(std::string_view feature) const;
    std::uint64_t fail(JobRef job, std::string reason, bool retryable);
    std::uint64_t release(JobRef job);
    /// Protocol 1.5: how far the job is, 0..100, with a note (at most 200 bytes) and a checkpoint
    /// (at most 4 KiB of UTF-8; empty keeps the one saved last) for whoever holds the job next.
    /// Answered by a ProgressSaved event. It does not renew the lease.
    std::uint64_t progress(JobRef job, std::int32_t percent, std::string note,
                           std::string checkpoint = {});

    /// Protocol 1.6: hands the job to an outside system for up to timeout_ms (1 ms .. 30 days),
    /// with a note for operators; answered by a JobParked event carrying the callback token the
    /// outside system finishes the job with. Renewals of the job stop now.
    std::uint64_t park(JobRef job, std::int64_t timeout_ms, std::string note = {});

    /// Stop heartbeating one job (stall rehearsal) while still counting it as held.
    void stop_renewing(std::int64_t job_id) { held_.stop_renewing(job_id); }

    /// Waits at most `max_wait` for traffic, sends due renewals and re-sends, detects a silent
    /// coordinator, and returns what happened. Throws only when the coordinator refuses HELLO
    /// for good (for instance an unknown organization).
    std::vector<Event> poll(Millis max_wait);

    /// Sends BYE (when a session is open) and closes the socket.
    void close();

    bool ready() const { return state_ == State::Ready; }
    bool claim_pending() const;
    /// Requests sent or waiting to be sent that have not been answered.
    std::size_t pending() const { return pending_.size(); }
    /// Of those, the ones sent: never more than options().max_in_flight.
    std::size_t in_flight() const;
    const HeldJobs& held() const { return held_; }
    const std::optional<proto::Welcome>& welcome() const { return welcome_; }
    const ClientStats& stats() const { return stats_; }
    const ClientOptions& options() const { return options_; }
    /// The coordinator endpoint in use (or being connected to next).
    const std::string& endpoint() const { return endpoint_order_[endpoint_at_]; }
    const base::Clock& clock() const { return clock_; }

  private:
    enum class State { Closed, BackingOff, Greeting, Ready };
    /// Where a reconnection goes: back to the same coordinator (it is alive and only lost the
    /// session, e.g. it restarted) or on to the next endpoint.
    enum class Target { Same, Next };

    struct Pending {
        proto::Message message;
        bool sent = false;
        TimePoint due;          ///< sent: reply expected by; not sent: send at (once ready)
        Millis retry_delay{0};  ///< the pause before the next re-send after an ERROR
        int sends = 0;
        /// A CLAIM that goes out inside the COMPLETE before it (its `next`), not on its own.
        bool carried = false;
        /// A RENEW that goes out inside another RENEW's `held` (protocol 1.3), not on its own;
        /// it takes no place under max_in_flight, as the coordinator counts that RENEW once.
        bool bundled = false;
    };

    std::uint64_t submit(proto::Message message);
    bool send(const proto::Message& message);
    void send_pending(Pending& p, TimePoint now);
    /// The renewals due now: one RENEW for them all where the session grants
    /// proto::kFeatureRenewHeld (several when they do not fit one body), else one each.
    void send_renewals(TimePoint now);
    void open_socket();
    void send_hello(TimePoint now);
    /// Whether HELLO names the protocol 1.2 features this client would use.
    bool asks_features() const;
    void close_socket();
    void reconnect(const std::string& why, Target target, TimePoint now, std::vector<Event>& out,
                   std::optional<Millis> retry_after = std::nullopt);
    /// The wait before the next connection attempt (common/base/reconnect_spread.hpp).
    Millis reconnect_wait(TimePoint now, std::optional<Millis> retry_after);
    void watch_transport(TimePoint now, std::vector<Event>& out);
    void handle(const proto::Message& message, TimePoint now, std::vector<Event>& out);
    void handle_error(const proto::Error& error, TimePoint now, std::vector<Event>& out);
    void on_welcome(const proto::Welcome& welcome, TimePoint now, std::vector<Event>& out);
    void run_timers(TimePoint now, std::vector<Event>& out);
    std::optional<TimePoint> next_deadline() const;
    void receive_all(TimePoint now, std::vector<Event>& out);

    zmq::context_t& context_;
    ClientOptions options_;
    const base::Clock& clock_;
    std::vector<std::string> endpoint_order_;
    std::size_t endpoint_at_ = 0;
    std::optional<zmq::socket_t> socket_;
    std::optional<SocketMonitor> monitor_;  ///< watches socket_; destroyed before it
    std::uint64_t socket_epoch_ = 0;        ///< changes whenever the socket is replaced
    State state_ = State::Closed;
    base::Backoff backoff_;
    std::minstd_rand jitter_;
    TimePoint reconnect_at_{};
    /// The coordinator's sessions, from the last WELCOME that said (reconnect hints).
    std::optional<std::int64_t> fleet_{};
    /// When the last job was assigned: a worker busy within a lease has work at stake.
    std::optional<TimePoint> last_assigned_{};
    std::uint64_t hello_req_ = 0;
    TimePoint hello_deadline_{};
    bool had_session_ = false;
    /// A coordinator older than protocol 1.2 refused HELLO's features: greet it without them.
    bool features_refused_ = false;
    /// The coordinator refused a RENEW that named several jobs although WELCOME granted it:
    /// renew each job alone until the next WELCOME.
    bool renew_held_refused_ = false;
    std::uint64_t next_req_ = 1;
    std::map<std::uint64_t, Pending> pending_;
    HeldJobs held_;
    std::optional<proto::Welcome> welcome_;
    ClientStats stats_;
};

}  // namespace aclaim::worker
