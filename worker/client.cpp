#include "worker/client.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <stdexcept>
#include <thread>
#include <zmq_addon.hpp>

namespace aclaim::worker {

namespace {

template <class... F>
struct Overloaded : F... {
    using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

/// ERROR codes after which the request had no effect (or an unknown one that a re-send settles)
/// and the same request may simply be sent again later.
bool retryable_error(std::string_view code) {
    static constexpr std::array<std::string_view, 6> kCodes = {
        "overloaded",        "database_unavailable", "database_error",
        "too_many_requests", "not_committed",        "outcome_unknown"};
    return std::find(kCodes.begin(), kCodes.end(), code) != kCodes.end();
}

/// The verdict-bearing requests: the only ones re-sent after their reply was lost, because the
/// coordinator answers a duplicate with ACCEPTED replayed=true or with the rejection.
std::optional<std::pair<Verdict::Op, JobRef>> terminal_op(const proto::Message& m) {
    if (const auto* c = std::get_if<proto::Complete>(&m))
        return std::pair{Verdict::Op::Complete, JobRef{c->job_id, c->generation}};
    if (const auto* f = std::get_if<proto::Fail>(&m))
        return std::pair{Verdict::Op::Fail, JobRef{f->job_id, f->generation}};
    if (const auto* r = std::get_if<proto::Release>(&m))
        return std::pair{Verdict::Op::Release, JobRef{r->job_id, r->generation}};
    return std::nullopt;
}

Millis until(TimePoint from, TimePoint to) {
    if (to <= from) return Millis(0);
    return std::chrono::ceil<Millis>(to - from);
}

}  // namespace

std::string_view to_string(Verdict::Op op) {
    switch (op) {
        case Verdict::Op::Complete:
            return "complete";
        case Verdict::Op::Fail:
            return "fail";
        case Verdict::Op::Release:
            return "release";
    }
    return "unknown";
}

Client::Client(zmq::context_t& context, ClientOptions options)
    : context_(context),
      options_(std::move(options)),
      backoff_(options_.backoff_first, options_.backoff_cap),
      jitter_(std::random_device{}()) {}

void Client::start() {
    open_socket();
    send_hello(SteadyClock::now());
}

void Client::open_socket() {
    ++socket_epoch_;
    socket_.emplace(context_, zmq::socket_type::dealer);
    // Unsent requests die with the socket: what is safe to re-send is re-sent on the next one.
    socket_->set(zmq::sockopt::linger, 0);
    socket_->set(zmq::sockopt::maxmsgsize, proto::kMaxTransportBytes);
    socket_->set(zmq::sockopt::reconnect_ivl_max, static_cast<int>(options_.backoff_cap.count()));
    if (options_.curve.enabled()) {
        socket_->set(zmq::sockopt::curve_serverkey, options_.curve.server_public);
        socket_->set(zmq::sockopt::curve_publickey, options_.curve.client_public);
        socket_->set(zmq::sockopt::curve_secretkey, options_.curve.client_secret);
    }
    socket_->connect(options_.endpoint);
}

void Client::send_hello(TimePoint now) {
    hello_req_ = next_req_++;
    state_ = State::Greeting;
    hello_deadline_ = now + options_.reply_timeout;
    send(proto::Hello{hello_req_, options_.worker_id, options_.org_id});
}

bool Client::send(const proto::Message& message) {
    if (!socket_) return false;
    const auto f = proto::encode(message, options_.encoding);
    const std::array<zmq::const_buffer, 3> parts{zmq::buffer(f.tag), zmq::buffer(f.type),
                                                 zmq::buffer(f.body)};
    try {
        // dontwait: a full queue means the coordinator is not reading; the reply timeout and
        // the retry schedule deal with that instead of blocking the worker.
        return zmq::send_multipart(*socket_, parts, zmq::send_flags::dontwait).has_value();
    } catch (const zmq::error_t& e) {
        spdlog::warn("worker={} send {} failed: {}", options_.worker_id, proto::type_name(message),
                     e.what());
        return false;
    }
}

std::uint64_t Client::submit(proto::Message message) {
    const auto req = next_req_++;
    std::visit([req](auto& m) { m.req = req; }, message);
    Pending p{std::move(message), false, SteadyClock::now(), Millis(0), 0};
    if (state_ == State::Ready) send_pending(p, SteadyClock::now());
    pending_.emplace(req, std::move(p));
    return req;
}

void Client::send_pending(Pending& p, TimePoint now) {
    if (!send(p.message)) {
        p.due = now + options_.retry_delay;
        return;
    }
    if (++p.sends > 1 && terminal_op(p.message)) ++stats_.resent;
    p.sent = true;
    p.due = now + options_.reply_timeout;
    if (const auto* c = std::get_if<proto::Claim>(&p.message)) p.due += Millis(c->wait_ms);
}

std::uint64_t Client::claim(std::int32_t max_jobs, std::int32_t wait_ms) {
    return submit(proto::Claim{0, max_jobs, wait_ms});
}

std::uint64_t Client::complete(JobRef job, std::string result_ref) {
    held_.stop_renewing(job.job_id);
    return submit(proto::Complete{0, job.job_id, job.generation, std::move(result_ref)});
}

std::uint64_t Client::fail(JobRef job, std::string reason, bool retryable) {
    held_.stop_renewing(job.job_id);
    return submit(proto::Fail{0, job.job_id, job.generation, std::move(reason), retryable});
}

std::uint64_t Client::release(JobRef job) {
    held_.stop_renewing(job.job_id);
    return submit(proto::Release{0, job.job_id, job.generation});
}

bool Client::claim_pending() const {
    return std::any_of(pending_.begin(), pending_.end(), [](const auto& kv) {
        return std::holds_alternative<proto::Claim>(kv.second.message);
    });
}

std::vector<Event> Client::poll(Millis max_wait) {
    std::vector<Event> out;
    auto now = SteadyClock::now();
    run_timers(now, out);
    Millis wait = out.empty() ? max_wait : Millis(0);
    if (const auto deadline = next_deadline()) wait = std::min(wait, until(now, *deadline));
    if (socket_) {
        std::array<zmq::pollitem_t, 1> items{{{socket_->handle(), 0, ZMQ_POLLIN, 0}}};
        try {
            zmq::poll(items, wait);
        } catch (const zmq::error_t& e) {
            // A signal (the owner's SIGTERM handler) interrupts the wait; the owner looks next.
            if (e.num() != EINTR) throw;
        }
        now = SteadyClock::now();
        receive_all(now, out);
    } else if (wait > Millis(0)) {
        std::this_thread::sleep_for(wait);
    }
    run_timers(SteadyClock::now(), out);
    return out;
}

void Client::receive_all(TimePoint now, std::vector<Event>& out) {
    while (socket_) {
        std::vector<zmq::message_t> parts;
        if (!zmq::recv_multipart(*socket_, std::back_inserter(parts), zmq::recv_flags::dontwait))
            return;
        std::vector<std::string_view> frames;
        frames.reserve(parts.size());
        for (const auto& p : parts) frames.emplace_back(p.data<char>(), p.size());
        auto decoded = proto::decode(frames);
        if (const auto* err = std::get_if<proto::DecodeError>(&decoded)) {
            spdlog::warn("worker={} ignored an undecodable message from the coordinator: {}: {}",
                         options_.worker_id, err->code, err->text);
            continue;
        }
        const auto epoch = socket_epoch_;
        handle(std::get<proto::Decoded>(decoded).message, now, out);
        // A reconnect replaced the socket: what is queued on the old one is gone with it.
        if (socket_epoch_ != epoch) return;
    }
}

void Client::handle(const proto::Message& message, TimePoint now, std::vector<Event>& out) {
    const auto take = [&](std::uint64_t req) -> std::optional<Pending> {
        const auto it = pending_.find(req);
        if (it == pending_.end()) return std::nullopt;
        auto p = std::move(it->second);
        pending_.erase(it);
        return p;
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
    std::visit(Overloaded{
                   [&](const proto::Welcome& w) {
                       if (state_ == State::Greeting && w.req == hello_req_)
                           on_welcome(w, now, out);
                   },
                   [&](const proto::Assigned& a) {
                       take(a.req);
                       // Jobs are taken even for a claim given up on: the coordinator granted them.
                       for (const auto& job : a.jobs) {
                           held_.add({job.job_id, job.generation}, Millis(job.lease_ms), now);
                           out.push_back(JobAssigned{job});
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
                       if (auto v = verdict(a.req, true)) {
                           v->replayed = a.replayed;
                           v->state = a.state;
                           out.push_back(std::move(*v));
                       }
                   },
                   [&](const proto::Rejected& r) {
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
        if (!retryable_error(e.code) && e.code != "draining")
            throw std::runtime_error("coordinator refused HELLO: " + e.code + ": " + e.text);
        reconnect("HELLO answered " + e.code, now, out);
        return;
    }
    // no_session: the coordinator restarted and ZeroMQ reconnected underneath us; draining: it
    // is going away. Either way a fresh session (perhaps with another coordinator) is needed.
    if (e.code == "no_session" || e.code == "draining") {
        reconnect("ERROR " + e.code + ": " + e.text, now, out);
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
    if (op && retryable_error(e.code)) {
        p.retry_delay = p.retry_delay == Millis(0)
                            ? options_.retry_delay
                            : std::min(p.retry_delay * 2, options_.backoff_cap);
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
    } else if (const auto* r = std::get_if<proto::Renew>(&message)) {
        // The next heartbeat tries again; a lost lease shows up as REVOKED.
        held_.renewal_abandoned(r->job_id);
    }
}

void Client::on_welcome(const proto::Welcome& w, TimePoint now, std::vector<Event>& out) {
    state_ = State::Ready;
    welcome_ = w;
    backoff_.reset();
    held_.set_heartbeat(Millis(std::max(1, w.heartbeat_ms)));
    // Leases kept running while we were away: renew everything we still hold at once.
    if (had_session_) held_.renew_all_now(now);
    out.push_back(SessionReady{w, had_session_});
    spdlog::info("worker={} session org={} lease_ms={} heartbeat_ms={}{}", options_.worker_id,
                 w.org_id, w.lease_ms, w.heartbeat_ms, had_session_ ? " (reconnected)" : "");
    had_session_ = true;
    for (auto& [req, p] : pending_) {
        if (!p.sent && p.due <= now) send_pending(p, now);
    }
}

void Client::reconnect(const std::string& why, TimePoint now, std::vector<Event>& out) {
    ++stats_.reconnects;
    ++socket_epoch_;
    socket_.reset();
    state_ = State::BackingOff;
    const auto nominal = backoff_.next();
    // Jitter spreads the workers of a restarted coordinator over the interval.
    std::uniform_int_distribution<Millis::rep> spread(nominal.count() / 2, nominal.count());
    reconnect_at_ = now + Millis(spread(jitter_));
    spdlog::warn("worker={} reconnecting to {} in {} ms (attempt {}): {}", options_.worker_id,
                 options_.endpoint, until(now, reconnect_at_).count(), backoff_.attempts(), why);
    for (auto it = pending_.begin(); it != pending_.end();) {
        Pending& p = it->second;
        if (terminal_op(p.message)) {
            p.sent = false;
            p.due = now;
            ++it;
            continue;
        }
        // A lost CLAIM is never re-sent: whatever it was granted comes back when the lease
        // ends. A lost RENEW is superseded by the renewal of everything after WELCOME.
        if (std::holds_alternative<proto::Claim>(p.message))
            out.push_back(ClaimEnded{ClaimEnded::Why::ConnectionLost, why});
        it = pending_.erase(it);
    }
}

void Client::run_timers(TimePoint now, std::vector<Event>& out) {
    switch (state_) {
        case State::Closed:
            return;
        case State::BackingOff:
            if (now >= reconnect_at_) {
                open_socket();
                send_hello(now);
            }
            return;
        case State::Greeting:
            if (now >= hello_deadline_)
                reconnect(
                    "no WELCOME within " + std::to_string(options_.reply_timeout.count()) + " ms",
                    now, out);
            return;
        case State::Ready:
            break;
    }
    for (const auto& [req, p] : pending_) {
        if (p.sent && p.due <= now) {
            reconnect("no reply to " + std::string(proto::type_name(p.message)) + " (req " +
                          std::to_string(req) + ") in time",
                      now, out);
            return;
        }
    }
    for (auto& [req, p] : pending_) {
        if (!p.sent && p.due <= now) send_pending(p, now);
    }
    for (const auto& job : held_.take_due(now)) submit(proto::Renew{0, job.job_id, job.generation});
}

std::optional<TimePoint> Client::next_deadline() const {
    switch (state_) {
        case State::Closed:
            return std::nullopt;
        case State::BackingOff:
            return reconnect_at_;
        case State::Greeting:
            return hello_deadline_;
        case State::Ready:
            break;
    }
    auto next = held_.next_due();
    for (const auto& [req, p] : pending_) {
        if (!next || p.due < *next) next = p.due;
    }
    return next;
}

void Client::close() {
    if (socket_ && state_ == State::Ready) {
        send(proto::Bye{next_req_++});
        // Give BYE a moment to leave; it needs no answer.
        socket_->set(zmq::sockopt::linger, 200);
    }
    socket_.reset();
    state_ = State::Closed;
    pending_.clear();
}

}  // namespace aclaim::worker
