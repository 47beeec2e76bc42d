#include "worker/client.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <stdexcept>
#include <thread>
#include <zmq_addon.hpp>

#include "common/base/reconnect_spread.hpp"
#include "worker/client_internal.hpp"

namespace aclaim::worker {

using detail::terminal_op;

namespace {

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

namespace {
const base::SystemClock kSystemClock;

std::minstd_rand make_jitter(std::uint64_t seed) {
    if (seed == 0) return std::minstd_rand(std::random_device{}());
    // Through seed_seq: small seeds given to minstd_rand directly give nearly equal first draws.
    std::seed_seq mixed{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)};
    return std::minstd_rand(mixed);
}
}  // namespace

Client::Client(zmq::context_t& context, ClientOptions options)
    : Client(context, std::move(options), kSystemClock) {}

Client::Client(zmq::context_t& context, ClientOptions options, const base::Clock& clock)
    : context_(context),
      options_(std::move(options)),
      clock_(clock),
      endpoint_order_(options_.endpoints),
      backoff_(options_.backoff_first, options_.backoff_cap),
      jitter_(make_jitter(options_.seed)) {
    if (endpoint_order_.empty()) throw std::invalid_argument("no coordinator endpoint given");
    // An order of its own per worker: when one coordinator dies, its workers go on to different
    // survivors instead of all to the one listed after it.
    std::shuffle(endpoint_order_.begin(), endpoint_order_.end(), jitter_);
}

void Client::start() {
    open_socket();
    send_hello(clock_.monotonic_now());
}

void Client::open_socket() {
    ++socket_epoch_;
    socket_.emplace(context_, zmq::socket_type::dealer);
    // Unsent requests die with the socket: what is safe to re-send is re-sent on the next one.
    socket_->set(zmq::sockopt::linger, 0);
    socket_->set(zmq::sockopt::maxmsgsize,
                 proto::socket_max_message_size(options_.curve.enabled()));
    socket_->set(zmq::sockopt::reconnect_ivl_max, static_cast<int>(options_.backoff_cap.count()));
    // ZMTP PINGs are answered by the coordinator's I/O thread, however busy its router is, so
    // only a hung process or a dead route stays silent past the timeout.
    const auto silence =
        static_cast<int>(std::max<Millis::rep>(options_.silence_timeout.count(), 3));
    socket_->set(zmq::sockopt::heartbeat_ivl, silence / 3);
    socket_->set(zmq::sockopt::heartbeat_timeout, silence);
    if (options_.curve.enabled()) {
        socket_->set(zmq::sockopt::curve_serverkey, options_.curve.server_public);
        socket_->set(zmq::sockopt::curve_publickey, options_.curve.client_public);
        socket_->set(zmq::sockopt::curve_secretkey, options_.curve.client_secret);
    }
    monitor_.emplace(context_, *socket_);
    socket_->connect(endpoint());
}

void Client::close_socket() {
    monitor_.reset();
    socket_.reset();
}

void Client::send_hello(TimePoint now) {
    hello_req_ = next_req_++;
    state_ = State::Greeting;
    hello_deadline_ = now + options_.reply_timeout;
    proto::Hello hello{hello_req_, options_.worker_id, options_.org_id, options_.queues};
    if (asks_features()) {
        if (options_.complete_claim) hello.features.emplace_back(proto::kFeatureCompleteClaim);
        if (options_.renew_held) hello.features.emplace_back(proto::kFeatureRenewHeld);
        if (options_.reconnect_hints) hello.features.emplace_back(proto::kFeatureReconnectHints);
        if (options_.progress) hello.features.emplace_back(proto::kFeatureProgress);
        if (options_.park) hello.features.emplace_back(proto::kFeaturePark);
    }
    send(hello);
}

bool Client::asks_features() const {
    return (options_.complete_claim || options_.renew_held || options_.reconnect_hints ||
            options_.progress || options_.park) &&
           !features_refused_;
}

bool Client::granted(std::string_view feature) const {
    return state_ == State::Ready && welcome_ &&
           std::find(welcome_->features.begin(), welcome_->features.end(), feature) !=
               welcome_->features.end();
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
    Pending p{std::move(message), false, clock_.monotonic_now(), Millis(0), 0};
    if (state_ == State::Ready) send_pending(p, clock_.monotonic_now());
    pending_.emplace(req, std::move(p));
    return req;
}

std::size_t Client::in_flight() const {
    return static_cast<std::size_t>(
        std::count_if(pending_.begin(), pending_.end(),
                      [](const auto& kv) { return kv.second.sent && !kv.second.bundled; }));
}

void Client::send_pending(Pending& p, TimePoint now) {
    // At the cap the request keeps its turn (pending_ is ordered by request id) until a reply
    // frees a slot.
    if (p.carried || p.bundled || in_flight() >= options_.max_in_flight) return;
    auto* complete = std::get_if<proto::Complete>(&p.message);
    Pending* carried = nullptr;
    if (complete != nullptr && !complete->next.empty()) {
        const auto it = pending_.find(complete->next.front().req);
        if (it != pending_.end() && granted(proto::kFeatureCompleteClaim)) {
            carried = &it->second;
        } else {
            // This session does not take a CLAIM inside a COMPLETE: the claim goes on its own.
            if (it != pending_.end()) it->second.carried = false;
            complete->next.clear();
        }
    }
    if (!send(p.message)) {
        p.due = now + options_.retry_delay;
        return;
    }
    if (++p.sends > 1 && terminal_op(p.message)) ++stats_.resent;
    p.sent = true;
    p.due = now + options_.reply_timeout;
    if (const auto* c = std::get_if<proto::Claim>(&p.message)) p.due += Millis(c->wait_ms);
    if (carried != nullptr) {
        // The claim is answered on its own from now on; a re-sent COMPLETE goes without it.
        carried->sent = true;
        carried->due = p.due + Millis(std::get<proto::Claim>(carried->message).wait_ms);
        complete->next.clear();
    }
    if (const auto* renew = std::get_if<proto::Renew>(&p.message)) {
        // Each job of a RENEW that names several is answered on its own, under its own req.
        for (const auto& h : renew->held) {
            const auto it = pending_.find(h.req);
            if (it == pending_.end()) continue;
            it->second.sent = true;
            it->second.due = p.due;
        }
    }
}

void Client::send_renewals(TimePoint now) {
    const bool together = granted(proto::kFeatureRenewHeld) && !renew_held_refused_;
    // Bundled, a job due within half a heartbeat goes with the ones due now, so that the held
    // jobs soon share one heartbeat (HeldJobs::take_due).
    const auto due = together ? held_.take_due(now, held_.heartbeat() / 2) : held_.take_due(now);
    if (!together || due.size() < 2) {
        for (const auto& job : due) submit(proto::Renew{0, job.job_id, job.generation});
        return;
    }
    // As many jobs as fit the coordinator's body limit, at most kMaxHeldRenewals a RENEW: an
    // entry is 24 bytes in binary and at most 100 in JSON (three 20-digit integers and names).
    const std::size_t entry = options_.encoding == proto::Encoding::Json ? 100 : 24;
    const std::size_t room = welcome_ && welcome_->max_body_bytes > 512
                                 ? (welcome_->max_body_bytes - 256) / entry
                                 : std::size_t{1};
    const std::size_t per_message = std::clamp<std::size_t>(room, 1, proto::kMaxHeldRenewals);
    for (std::size_t first = 0; first < due.size(); first += per_message) {
        const std::size_t last = std::min(due.size(), first + per_message);
        proto::Renew renew{0, due[first].job_id, due[first].generation};
        // The entries first, so that sending the RENEW finds them; they are sent with it.
        for (std::size_t i = first + 1; i < last; ++i) {
            const auto req = next_req_++;
            renew.held.push_back(proto::HeldRenewal{req, due[i].job_id, due[i].generation});
            Pending entry_pending{proto::Renew{req, due[i].job_id, due[i].generation}, false, now,
                                  Millis(0), 0};
            entry_pending.bundled = true;
            pending_.emplace(req, std::move(entry_pending));
        }
        submit(std::move(renew));
    }
}

std::uint64_t Client::claim(std::int32_t max_jobs, std::int32_t wait_ms) {
    return submit(proto::Claim{0, max_jobs, wait_ms});
}

std::uint64_t Client::complete(JobRef job, std::string result_ref) {
    held_.stop_renewing(job.job_id);
    return submit(proto::Complete{0, job.job_id, job.generation, std::move(result_ref)});
}

std::pair<std::uint64_t, std::uint64_t> Client::complete_then_claim(JobRef job,
                                                                    std::string result_ref,
                                                                    std::int32_t max_jobs,
                                                                    std::int32_t wait_ms) {
    held_.stop_renewing(job.job_id);
    if (!granted(proto::kFeatureCompleteClaim)) {
        const auto done =
            submit(proto::Complete{0, job.job_id, job.generation, std::move(result_ref)});
        return {done, claim(max_jobs, wait_ms)};
    }
    // The claim's entry first, so that sending the completion finds it; both are sent by the
    // completion's send_pending.
    const auto claim_req = next_req_++;
    const auto now = clock_.monotonic_now();
    pending_.emplace(claim_req, Pending{proto::Claim{claim_req, max_jobs, wait_ms}, false, now,
                                        Millis(0), 0, true});
    proto::Complete complete{0, job.job_id, job.generation, std::move(result_ref)};
    complete.next.push_back(proto::Claim{claim_req, max_jobs, wait_ms});
    return {submit(std::move(complete)), claim_req};
}

std::uint64_t Client::fail(JobRef job, std::string reason, bool retryable) {
    held_.stop_renewing(job.job_id);
    return submit(proto::Fail{0, job.job_id, job.generation, std::move(reason), retryable});
}

std::uint64_t Client::release(JobRef job) {
    held_.stop_renewing(job.job_id);
    return submit(proto::Release{0, job.job_id, job.generation});
}

std::uint64_t Client::progress(JobRef job, std::int32_t percent, std::string note,
                               std::string checkpoint) {
    return submit(proto::Progress{0, job.job_id, job.generation, percent, std::move(note),
                                  std::move(checkpoint)});
}

std::uint64_t Client::park(JobRef job, std::int64_t timeout_ms, std::string note) {
    held_.stop_renewing(job.job_id);
    return submit(proto::Park{0, job.job_id, job.generation, timeout_ms, std::move(note)});
}

bool Client::claim_pending() const {
    return std::any_of(pending_.begin(), pending_.end(), [](const auto& kv) {
        return std::holds_alternative<proto::Claim>(kv.second.message);
    });
}

std::vector<Event> Client::poll(Millis max_wait) {
    std::vector<Event> out;
    auto now = clock_.monotonic_now();
    run_timers(now, out);
    Millis wait = out.empty() ? max_wait : Millis(0);
    if (const auto deadline = next_deadline()) wait = std::min(wait, until(now, *deadline));
    if (socket_) {
        std::array<zmq::pollitem_t, 2> items{
            {{socket_->handle(), 0, ZMQ_POLLIN, 0}, {monitor_->handle(), 0, ZMQ_POLLIN, 0}}};
        try {
            zmq::poll(items, wait);
        } catch (const zmq::error_t& e) {
            // A signal (the owner's SIGTERM handler) interrupts the wait; the owner looks next.
            if (e.num() != EINTR) throw;
        }
        now = clock_.monotonic_now();
        // Replies that arrived before the connection dropped still count.
        receive_all(now, out);
        watch_transport(now, out);
    } else if (wait > Millis(0)) {
        std::this_thread::sleep_for(wait);
    }
    run_timers(clock_.monotonic_now(), out);
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

void Client::watch_transport(TimePoint now, std::vector<Event>& out) {
    while (monitor_ && (state_ == State::Greeting || state_ == State::Ready)) {
        const auto event = monitor_->next();
        if (!event) return;
        // With one endpoint there is nowhere else to go: ZeroMQ keeps retrying the connection
        // itself, and the HELLO deadline bounds the wait.
        if (event->kind == TransportEvent::Kind::ConnectFailed && endpoint_order_.size() == 1)
            continue;
        reconnect(event->describe(), Target::Next, now, out);
    }
}

Millis Client::reconnect_wait(TimePoint now, std::optional<Millis> retry_after) {
    // Spread over a window the size of the fleet the coordinator reported; a worker with work at
    // stake (a job held, or one assigned within a lease) comes back within a heartbeat, so that
    // its leases outlive the move and its work resumes first.
    auto window = base::ReconnectSpread::window(fleet_, options_.backoff_first);
    const Millis lease(welcome_ ? welcome_->lease_ms : 0);
    const bool busy = held_.size() > 0 || (last_assigned_ && now - *last_assigned_ < lease);
    if (busy) window = std::min(window, held_.heartbeat());
    const auto wait = base::ReconnectSpread::next_wait(backoff_, window, retry_after, jitter_);
    // Whatever it was told: a longer wait would outlast its leases.
    return busy ? std::min(wait, held_.heartbeat()) : wait;
}

void Client::reconnect(const std::string& why, Target target, TimePoint now,
                       std::vector<Event>& out, std::optional<Millis> retry_after) {
    ++stats_.reconnects;
    ++socket_epoch_;
    close_socket();
    state_ = State::BackingOff;
    const std::string left = endpoint();
    if (target == Target::Next && endpoint_order_.size() > 1) {
        endpoint_at_ = (endpoint_at_ + 1) % endpoint_order_.size();
        ++stats_.failovers;
    }
    // The first attempt after a session is spread over a window the size of the fleet; later
    // ones back off, growing over consecutive failures whichever endpoint they were at, and
    // starting over only at a WELCOME, so a cell with every coordinator down is not hammered.
    reconnect_at_ = now + reconnect_wait(now, retry_after);
    if (endpoint() == left) {
        spdlog::warn("worker={} reconnecting to {} in {} ms (attempt {}): {}", options_.worker_id,
                     left, until(now, reconnect_at_).count(), backoff_.attempts(), why);
    } else {
        spdlog::warn("worker={} failing over from {} to {} in {} ms (attempt {}): {}",
                     options_.worker_id, left, endpoint(), until(now, reconnect_at_).count(),
                     backoff_.attempts(), why);
    }
    for (auto it = pending_.begin(); it != pending_.end();) {
        Pending& p = it->second;
        if (terminal_op(p.message)) {
            p.sent = false;
            p.due = now;
            // Its claim is reported lost below, as every pending claim is.
            if (auto* c = std::get_if<proto::Complete>(&p.message)) c->next.clear();
            ++it;
            continue;
        }
        // A lost CLAIM is never re-sent: whatever it was granted comes back when the lease
        // ends. A lost RENEW is superseded by the renewal of everything after WELCOME.
        // In place: converting a temporary here trips a false maybe-uninitialized in gcc 12.
        if (std::holds_alternative<proto::Claim>(p.message))
            out.emplace_back(std::in_place_type<ClaimEnded>,
                             ClaimEnded{ClaimEnded::Why::ConnectionLost, why});
        it = pending_.erase(it);
    }
}

void Client::run_timers(TimePoint now, std::vector<Event>& out) {
    switch (state_) {
        case State::Closed:
            return;
        case State::BackingOff:
            if (now >= reconnect_at_) {
                // A HELLO turned away for now keeps its connection: only HELLO is said again.
                if (!socket_) open_socket();
                send_hello(now);
            }
            return;
        case State::Greeting:
            if (now >= hello_deadline_)
                reconnect(
                    "no WELCOME within " + std::to_string(options_.reply_timeout.count()) + " ms",
                    Target::Next, now, out);
            return;
        case State::Ready:
            break;
    }
    for (const auto& [req, p] : pending_) {
        if (p.sent && p.due <= now) {
            reconnect("no reply to " + std::string(proto::type_name(p.message)) + " (req " +
                          std::to_string(req) + ") in time",
                      Target::Next, now, out);
            return;
        }
    }
    for (auto& [req, p] : pending_) {
        if (!p.sent && p.due <= now) send_pending(p, now);
    }
    send_renewals(now);
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
    const bool at_cap = in_flight() >= options_.max_in_flight;
    for (const auto& [req, p] : pending_) {
        // Requests waiting for a free slot are woken by the reply that frees it, not by time;
        // a bundled renewal goes when the RENEW that names it does.
        if (!p.sent && (at_cap || p.bundled)) continue;
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
    close_socket();
    state_ = State::Closed;
    pending_.clear();
}

}  // namespace aclaim::worker
