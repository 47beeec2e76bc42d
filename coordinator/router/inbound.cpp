#include "coordinator/router/inbound.hpp"

#include <sodium.h>
#include <spdlog/fmt/bin_to_hex.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <optional>
#include <tuple>
#include <type_traits>
#include <variant>

#include "common/base/reconnect_spread.hpp"
#include "common/ops/worker_keys.hpp"
#include "common/proto/wire_errors.hpp"
#include "coordinator/auth/zap.hpp"

namespace aclaim::coordinator {

namespace {

/// Messages read per poll round before the mailbox gets its turn.
constexpr int kReadsPerRound = 256;
/// The longest a stopping coordinator keeps answering what waits on its socket.
constexpr auto kRefuseFor = std::chrono::milliseconds(250);
/// What a draining coordinator asks the workers it turns away to wait at least: its drain, its
/// last refusals and a successor's start on the same endpoint take about this long.
constexpr auto kDrainRetryFloor = std::chrono::milliseconds(1000);
/// Frames kept after the routing id; a longer message is malformed anyway, and keeping every
/// frame of it would let one message allocate without bound.
constexpr std::size_t kFramesKept = 4;

/// A callback token (protocol 1.6): 32 bytes from libsodium's CSPRNG, as lowercase hex.
std::string new_park_token() {
    std::array<unsigned char, proto::kParkTokenChars / 2> raw{};
    randombytes_buf(raw.data(), raw.size());
    std::array<char, proto::kParkTokenChars + 1> hex{};
    sodium_bin2hex(hex.data(), hex.size(), raw.data(), raw.size());
    sodium_memzero(raw.data(), raw.size());
    return {hex.data(), proto::kParkTokenChars};
}

/// The wire requests that name a job, fenced by its generation, in RequestKind's order after
/// Claim; fenced_kind<M>() is the store's kind of M, or none for the others.
using Fenced = std::tuple<proto::Renew, proto::Complete, proto::Fail, proto::Release,
                          proto::Progress, proto::Park>;
template <class M, std::size_t I = 0>
constexpr std::optional<RequestKind> fenced_kind() {
    if constexpr (I == std::tuple_size_v<Fenced>) {
        return std::nullopt;
    } else if constexpr (std::is_same_v<M, std::tuple_element_t<I, Fenced>>) {
        return static_cast<RequestKind>(I + 1);
    } else {
        return fenced_kind<M, I + 1>();
    }
}
static_assert(fenced_kind<proto::Park>() == RequestKind::Park && !fenced_kind<proto::Claim>());

/// What a fenced request carries beyond its job and generation (RENEW and RELEASE: nothing).
template <class M>
void carry(StoreRequest&, const M&) {}
void carry(StoreRequest& r, const proto::Complete& m) {
    r.result_ref = m.result_ref;
}
void carry(StoreRequest& r, const proto::Fail& m) {
    r.reason = m.reason;
    r.retryable = m.retryable;
}
void carry(StoreRequest& r, const proto::Progress& m) {
    r.percent = m.percent;
    r.note = m.note;
    r.checkpoint = m.checkpoint;
}
void carry(StoreRequest& r, const proto::Park& m) {
    r.park_timeout_ms = m.timeout_ms;
    r.note = m.note;
    // Drawn here, once per PARK: a re-send of this request after a lost connection parks the job
    // again under the same token.
    r.token = new_park_token();
}

/// The store's request for a wire request that goes to the database, on behalf of the session
/// it came on: the organization, the worker and the queues are the session's, never the body's.
std::optional<StoreRequest> store_request(const proto::Message& m, const Session& session) {
    return std::visit(
        [&session](const auto& body) -> std::optional<StoreRequest> {
            using M = std::decay_t<decltype(body)>;
            StoreRequest r{.org_id = session.org_id, .worker_id = session.worker_id};
            if constexpr (std::is_same_v<M, proto::Claim>) {
                r.kind = RequestKind::Claim;
                r.queues = session.queues;
                r.max_jobs = body.max_jobs;
            } else if constexpr (fenced_kind<M>().has_value()) {
                r.kind = *fenced_kind<M>();
                r.job_id = body.job_id;
                r.generation = body.generation;
                carry(r, body);
            } else {
                return std::nullopt;
            }
            return r;
        },
        m);
}

}  // namespace

int Inbound::read() {
    int n = 0;
    for (; n < kReadsPerRound; ++n) {
        zmq::message_t head;
        if (!p_.router.recv(head, zmq::recv_flags::dontwait)) break;
        const std::string routing_id = head.to_string();
        std::vector<zmq::message_t> parts;
        std::size_t frame_count = 0;
        bool more = head.more();
        while (more) {
            zmq::message_t part;
            // The rest of a multipart message is delivered together with its first frame.
            (void)p_.router.recv(part, zmq::recv_flags::none);
            more = part.more();
            ++frame_count;
            if (parts.size() < kFramesKept) parts.push_back(std::move(part));
        }
        p_.metrics.requests.fetch_add(1, std::memory_order_relaxed);
        // Which connection it came on, so that its session is closed when that connection is: the
        // frames the peer sent carry it (the routing id frame is the ROUTER's own).
        current_fd_ = parts.empty() ? -1 : zmq_msg_get(parts[0].handle(), ZMQ_SRCFD);
        // Under CURVE, libzmq stamps every frame with the User-Id the ZAP handler returned for
        // this connection's key (the one source of a request's organization) and with the key.
        Credentials credentials;
        if (!options_.plaintext && !parts.empty()) {
            if (const char* id = zmq_msg_gets(parts[0].handle(), "User-Id")) {
                credentials.user_id = id;
            }
            if (const char* key = zmq_msg_gets(parts[0].handle(), ZapHandler::kKeyProperty)) {
                credentials.public_key = key;
            }
            if (const char* queues = zmq_msg_gets(parts[0].handle(), ZapHandler::kQueuesProperty)) {
                credentials.queues = queues;
            }
        }
        std::vector<std::string_view> frames;
        frames.reserve(parts.size());
        for (const auto& p : parts) frames.push_back(p.to_string_view());
        try {
            handle_message(routing_id, credentials, frames, frame_count);
        } catch (const std::exception& e) {
            spdlog::error("request from connection {} not handled: {}", spdlog::to_hex(routing_id),
                          e.what());
        }
    }
    // The round's requests of open sessions went first; new sessions now.
    admit_hellos(kHellosPerRound);
    return n;
}

void Inbound::admit_hellos(std::size_t at_most) {
    for (std::size_t i = 0; i < at_most && !hellos_.empty(); ++i) {
        WaitingHello h = std::move(hellos_.front());
        hellos_.pop_front();
        waiting_ids_.erase(h.routing_id);
        const auto& hints = h.hello.features;
        const bool hinted =
            std::find(hints.begin(), hints.end(), proto::kFeatureReconnectHints) != hints.end();
        // What may have changed while it waited: a drain began, or its key was revoked.
        if (p_.revocations.revoked(h.credentials.public_key)) {
            p_.revocations.cut_off(h.routing_id);
            p_.replier.send_error(h.routing_id, h.encoding, h.hello.req, proto::errors::kKeyRevoked,
                                  "this connection's key has been revoked; nothing more is done "
                                  "for it");
        } else if (p_.dispatcher.draining() || refusing_) {
            p_.replier.send_error(h.routing_id, h.encoding, h.hello.req, proto::errors::kDraining,
                                  "the coordinator is shutting down and takes no new HELLO; send "
                                  "it again after reconnecting (another coordinator may serve it)",
                                  hinted ? retry_after(proto::errors::kDraining) : std::nullopt);
        } else {
            handle_hello(h.routing_id, h.credentials, h.hello, h.encoding, h.fd);
        }
    }
}

void Inbound::connection_closed(int fd) {
    for (const auto& routing_id : p_.sessions.close_fd(fd)) {
        // Nobody is left to answer: the claims are dropped, not answered.
        p_.parked.take_connection(routing_id);
        spdlog::debug("connection {} closed: its session and parked claims are gone",
                      spdlog::to_hex(routing_id));
    }
    p_.metrics.connected_sessions.store(static_cast<std::int64_t>(p_.sessions.size()));
}

std::int32_t Inbound::limit_retry_after(Metrics::TenantLimit limit) {
    // A long poll ends within a minute and is answered at once when work comes: a second. A
    // session closes when its worker leaves, which a key at its limit is not about to do: five,
    // so that the HELLOs it keeps sending cost little.
    const bool sessions = limit == Metrics::TenantLimit::SessionsPerKey ||
                          limit == Metrics::TenantLimit::SessionsPerOrg;
    const std::chrono::milliseconds::rep base = sessions ? 5000 : 1000;
    std::uniform_int_distribution<std::chrono::milliseconds::rep> more(0, base);
    return static_cast<std::int32_t>(base + more(spread_));
}

void Inbound::refuse_at_limit(const std::string& routing_id, proto::Encoding encoding,
                              std::uint64_t req, bool hinted, Metrics::TenantLimit limit,
                              const std::string& text) {
    p_.metrics.count_limit(limit);
    p_.replier.send_error(
        routing_id, encoding, req, proto::errors::kOverloaded, text,
        hinted ? std::optional<std::int32_t>(limit_retry_after(limit)) : std::nullopt);
}

std::optional<Metrics::TenantLimit> Inbound::parked_limit(const std::string& routing_id,
                                                          store::OrgId org) const {
    if (p_.parked.of_connection(routing_id) >=
        static_cast<std::size_t>(options_.max_parked_per_session))
        return Metrics::TenantLimit::ParkedPerSession;
    if (p_.parked.of_org(org) >= static_cast<std::size_t>(options_.max_parked_per_org))
        return Metrics::TenantLimit::ParkedPerOrg;
    return std::nullopt;
}

std::optional<std::int32_t> Inbound::retry_after(std::string_view code, bool whole_window) {
    using std::chrono::milliseconds;
    if (code == proto::errors::kDraining) {
        const auto window = whole_window ? base::ReconnectSpread::window(
                                               static_cast<std::int64_t>(p_.sessions.size()),
                                               base::ReconnectSpread::kMinWindow)
                                         : kDrainRetryFloor;
        std::uniform_int_distribution<milliseconds::rep> share(0, window.count());
        return static_cast<std::int32_t>(std::min<milliseconds::rep>(
            kDrainRetryFloor.count() + share(spread_), proto::kMaxRetryAfterMs));
    }
    if (code == proto::errors::kOverloaded) {
        // The HELLOs ahead of it at the rate a spread fleet arrives, and up to half again, so
        // that those turned away together do not come back together.
        const auto ahead =
            static_cast<milliseconds::rep>(hellos_.size()) * kRetryPerWaitingHello.count();
        std::uniform_int_distribution<milliseconds::rep> more(0, ahead / 2);
        return static_cast<std::int32_t>(
            std::clamp<milliseconds::rep>(ahead + more(spread_), 200, proto::kMaxRetryAfterMs));
    }
    return std::nullopt;
}

void Inbound::refuse_remaining() {
    refusing_ = true;
    // Bounded: workers reconnecting to a coordinator that is going away keep sending HELLO, and
    // a crowd of them never leaves the socket empty. What is left is dropped with the socket,
    // which a worker sees as the coordinator gone, as it is.
    const auto until = p_.clock.monotonic_now() + kRefuseFor;
    admit_hellos(hellos_.size());
    while (read() > 0 && p_.clock.monotonic_now() < until) {
    }
    admit_hellos(hellos_.size());
}

void Inbound::handle_message(const std::string& routing_id, const Credentials& credentials,
                             const std::vector<std::string_view>& frames, std::size_t frame_count) {
    auto decoded = proto::decode(frames, {options_.max_body_bytes, frame_count});
    if (auto* err = std::get_if<proto::DecodeError>(&decoded)) {
        spdlog::debug("undecodable request from connection {}: {}: {}", spdlog::to_hex(routing_id),
                      err->code, err->text);
        p_.replier.send_error(routing_id, err->reply_encoding, err->req, err->code, err->text);
        return;
    }
    handle_request(routing_id, credentials, std::get<proto::Decoded>(decoded));
}

void Inbound::handle_request(const std::string& routing_id, const Credentials& credentials,
                             const proto::Decoded& decoded) {
    const proto::Message& message = decoded.message;
    const auto enc = decoded.encoding;
    const std::uint64_t req = proto::request_id(message);
    const std::string type(proto::type_name(message));
    const std::string& user_id = credentials.user_id;
    // A COMPLETE that carries the worker's next CLAIM (protocol 1.2) is two requests, and a
    // refusal answers both: the claim's answer is what the worker waits for next.
    const auto* complete = std::get_if<proto::Complete>(&message);
    const proto::Claim* next =
        complete != nullptr && !complete->next.empty() ? &complete->next.front() : nullptr;
    // A request on a connection whose HELLO waits for its round: that HELLO first, in order.
    if (!waiting_ids_.empty() && waiting_ids_.count(routing_id) != 0) admit_hellos(hellos_.size());
    const auto* hello = std::get_if<proto::Hello>(&message);
    // Likewise a RENEW that names several jobs (protocol 1.3): each job waits for its answer.
    const auto* renew = std::get_if<proto::Renew>(&message);
    const std::vector<proto::HeldRenewal>* held =
        renew != nullptr && !renew->held.empty() ? &renew->held : nullptr;
    if (renew != nullptr) {
        p_.metrics.renew_messages.fetch_add(1, std::memory_order_relaxed);
        p_.metrics.renew_jobs.fetch_add(1 + renew->held.size(), std::memory_order_relaxed);
    }
    // Granted reconnect hints (or asking for them now): `draining` and `overloaded` say when to
    // come back.
    const auto hinted = [&] {
        if (hello != nullptr)
            return std::find(hello->features.begin(), hello->features.end(),
                             proto::kFeatureReconnectHints) != hello->features.end();
        const Session* s = p_.sessions.find(routing_id);
        return s != nullptr && s->reconnect_hints;
    };
    const auto refuse = [&](std::string_view code, const std::string& text) {
        const auto after = hinted() ? retry_after(code) : std::nullopt;
        p_.replier.send_error(routing_id, enc, req, code, text, after);
        if (next != nullptr) p_.replier.send_error(routing_id, enc, next->req, code, text, after);
        if (held != nullptr) {
            for (const auto& h : *held) {
                p_.replier.send_error(routing_id, enc, h.req, code, text, after);
            }
        }
    };
    // A connection outlives the revocation of its key (a ROUTER cannot hang up on one peer), so
    // every request is checked against the latest re-check, HELLO included.
    if (p_.revocations.revoked(credentials.public_key)) {
        p_.revocations.cut_off(routing_id);
        refuse(proto::errors::kKeyRevoked,
               "this connection's key has been revoked; nothing more is done for it");
        return;
    }
    if (!proto::is_request(message)) {
        refuse(proto::errors::kInvalid, type + " is not a request");
        return;
    }
    // A draining coordinator opens no sessions; once the drain has ended it serves nothing.
    if ((std::holds_alternative<proto::Hello>(message) && p_.dispatcher.draining()) ||
        (refusing_ && !std::holds_alternative<proto::Claim>(message) &&
         !std::holds_alternative<proto::Bye>(message))) {
        refuse(proto::errors::kDraining,
               "the coordinator is shutting down and takes no new " + type +
                   "; send it again after reconnecting (another coordinator may "
                   "serve it)");
        return;
    }
    if (hello != nullptr) {
        // A HELLO on an open session changes it at once; one that opens a session waits for the
        // end of the round, behind the requests of open sessions, and is turned away with an
        // answer (not left to time out) when too many wait already.
        if (p_.sessions.find(routing_id) != nullptr) {
            handle_hello(routing_id, credentials, *hello, enc, current_fd_);
        } else if (hellos_.size() >= kMaxHellosWaiting) {
            refuse(proto::errors::kOverloaded,
                   std::to_string(hellos_.size()) +
                       " HELLOs are waiting for a session already; say HELLO again later");
        } else {
            waiting_ids_.insert(routing_id);
            hellos_.push_back({routing_id, credentials, *hello, enc, current_fd_});
        }
        return;
    }
    Session* session = p_.sessions.find(routing_id);
    if (session == nullptr) {
        refuse(proto::errors::kNoSession, "send HELLO before " + type);
        return;
    }
    // A routing id is one connection and a connection one key, so this cannot differ; checked
    // anyway because a session acting for the wrong organization is the one unforgivable bug.
    if (session->user_id != user_id) {
        refuse(proto::errors::kUnauthenticated,
               "this connection's identity is not the one its session was opened with");
        return;
    }
    p_.sessions.touch(*session);
    session->encoding = enc;
    if (std::holds_alternative<proto::Bye>(message)) {
        handle_bye(routing_id);
        return;
    }
    std::optional<StoreRequest> ask = store_request(message, *session);
    if (!ask) {
        refuse(proto::errors::kInvalid, type + " is not handled");
        return;
    }
    const auto* claim = std::get_if<proto::Claim>(&message);
    if (claim != nullptr && p_.dispatcher.draining()) {
        // A session granted reconnect hints is told when to come back (protocol 1.4).
        if (session->reconnect_hints) {
            p_.replier.send_error(routing_id, enc, req, proto::errors::kDraining,
                                  "the coordinator is shutting down; reconnect after "
                                  "retry_after_ms (another coordinator may serve)",
                                  retry_after(proto::errors::kDraining, true));
            return;
        }
        p_.replier.send(routing_id, proto::NoWork{req, std::string(proto::errors::kDraining)}, enc);
        p_.metrics.no_work.fetch_add(1, std::memory_order_relaxed);
        return;
    }
    const int requests = next != nullptr ? 2 : 1;
    if (session->outstanding + requests > options_.max_inflight_per_session) {
        refuse(proto::errors::kTooManyRequests, "this session already has " +
                                                    std::to_string(session->outstanding) +
                                                    " requests outstanding");
        return;
    }
    // One organization may fill half the queue: beyond, its requests are refused while others'
    // still go in (asked only once the queue is half full, to spare the lookup).
    const auto queued = p_.dispatcher.queued();
    const auto max_queued = static_cast<std::size_t>(options_.max_queued_requests);
    if (queued >= max_queued ||
        (queued >= max_queued / 2 && p_.dispatcher.queued_of(session->org_id) >= max_queued / 2)) {
        refuse(proto::errors::kOverloaded, "the database threads are behind; retry shortly");
        return;
    }
    // A claim that may wait may park: one tenant's long polls must not take every place.
    if (claim != nullptr && claim->wait_ms > 0) {
        if (const auto limit = parked_limit(routing_id, session->org_id)) {
            refuse_at_limit(
                routing_id, enc, req, session->reconnect_hints, *limit,
                *limit == Metrics::TenantLimit::ParkedPerSession
                    ? "this session has " + std::to_string(options_.max_parked_per_session) +
                          " claims waiting already; claim again when one is answered"
                    : "this organization has " + std::to_string(options_.max_parked_per_org) +
                          " claims waiting already; claim again later");
            return;
        }
    }
    RoutedRequest request = routed(routing_id, *session, enc, req, std::move(*ask), claim);
    ++session->outstanding;
    if (held != nullptr) {
        // One place of the session's, taken by the RENEW's own job; one statement for them all.
        std::vector<RoutedRequest> group;
        group.reserve(held->size() + 1);
        const StoreRequest& first = request.ask();
        for (const auto& h : *held) {
            StoreRequest one = first;
            one.job_id = h.job_id;
            one.generation = h.generation;
            RoutedRequest r = routed(routing_id, *session, enc, h.req, std::move(one), nullptr);
            r.reply.counted = false;
            group.push_back(std::move(r));
        }
        group.insert(group.begin(), std::move(request));
        p_.dispatcher.dispatch_group(std::move(group));
        return;
    }
    if (next == nullptr) {
        // A completion frees its job's slot: a claim of this connection waiting for a slot of a
        // limited queue looks again in the completion's own transaction, as a COMPLETE with next
        // would, instead of one round trip after it.
        if (request.kind() == RequestKind::Complete && !p_.dispatcher.draining()) {
            if (auto waiting = p_.parked.take_slot_bound_of(session->org_id, routing_id)) {
                p_.wakes.stamp(*waiting);
                p_.dispatcher.dispatch_pair(std::move(request), std::move(*waiting));
                return;
            }
        }
        p_.dispatcher.dispatch(std::move(request));
        return;
    }
    if (p_.dispatcher.draining()) {
        // The completion is served; the claim gets what a CLAIM gets during a drain.
        p_.dispatcher.dispatch(std::move(request));
        p_.replier.send(routing_id, proto::NoWork{next->req, std::string(proto::errors::kDraining)},
                        enc);
        p_.metrics.no_work.fetch_add(1, std::memory_order_relaxed);
        return;
    }
    if (next->wait_ms > 0) {
        if (const auto limit = parked_limit(routing_id, session->org_id)) {
            // The completion is served; only the claim it carries waits for a place.
            p_.dispatcher.dispatch(std::move(request));
            refuse_at_limit(
                routing_id, enc, next->req, session->reconnect_hints, *limit,
                "too many claims of this " +
                    std::string(*limit == Metrics::TenantLimit::ParkedPerSession ? "session"
                                                                                 : "organization") +
                    " are waiting already; claim again later");
            return;
        }
    }
    auto next_ask = store_request(proto::Message{*next}, *session);
    RoutedRequest follower =
        routed(routing_id, *session, enc, next->req, std::move(*next_ask), next);
    ++session->outstanding;
    p_.dispatcher.dispatch_pair(std::move(request), std::move(follower));
}

RoutedRequest Inbound::routed(const std::string& routing_id, const Session& session,
                              proto::Encoding encoding, std::uint64_t req, StoreRequest ask,
                              const proto::Claim* claim) const {
    RoutedRequest request;
    request.reply = ReplyTo{routing_id, encoding, req, session.public_key};
    request.db.ask = std::move(ask);
    if (claim != nullptr) {
        request.wait_ms = claim->wait_ms;
        request.wait_until =
            p_.clock.monotonic_now() + std::chrono::milliseconds(std::max(0, claim->wait_ms));
        p_.wakes.stamp(request);
    }
    return request;
}

void Inbound::handle_hello(const std::string& routing_id, const Credentials& credentials,
                           const proto::Hello& hello, proto::Encoding encoding, int fd) {
    const std::string& user_id = credentials.user_id;
    store::OrgId org = hello.org_id;
    if (!options_.plaintext) {
        // The organization is the authenticated key's; HELLO's org_id is ignored. The worker id
        // must be the key's name, or one key could act as (and fence out) any worker of its
        // organization.
        const auto identity = KeyIdentity::parse(user_id);
        if (!identity) {
            p_.replier.send_error(routing_id, encoding, hello.req, proto::errors::kUnauthenticated,
                                  "the connection carries no authenticated identity");
            return;
        }
        if (hello.worker_id != identity->name) {
            p_.replier.send_error(routing_id, encoding, hello.req, proto::errors::kUnauthenticated,
                                  "worker_id '" + hello.worker_id +
                                      "' is not the name this key is " + "registered under");
            return;
        }
        org = identity->org_id;
    } else if (org <= 0) {
        p_.replier.send_error(routing_id, encoding, hello.req, proto::errors::kInvalid,
                              "org_id must be a positive organization id");
        return;
    }
    // The queues served: those named, each once, in name order (requests that serve the same set
    // are coalesced together); none named means the default queue only.
    std::vector<std::string> queues = hello.queues;
    if (queues.empty()) queues.emplace_back(base::kDefaultQueue);
    std::sort(queues.begin(), queues.end());
    queues.erase(std::unique(queues.begin(), queues.end()), queues.end());
    if (!credentials.queues.empty()) {
        const auto allowed = ops::split_queues(credentials.queues);
        for (const auto& q : queues) {
            if (std::find(allowed.begin(), allowed.end(), q) == allowed.end()) {
                p_.replier.send_error(routing_id, encoding, hello.req,
                                      proto::errors::kQueueNotAllowed,
                                      "this key may serve only the queues " + credentials.queues +
                                          ", not '" + q + "'");
                return;
            }
        }
    }
    if (const auto limit =
            p_.sessions.over_limit(routing_id, org, hello.worker_id,
                                   static_cast<std::size_t>(options_.max_sessions_per_key),
                                   static_cast<std::size_t>(options_.max_sessions_per_org))) {
        const bool hinted = std::find(hello.features.begin(), hello.features.end(),
                                      proto::kFeatureReconnectHints) != hello.features.end();
        const bool per_key = *limit == SessionLimit::PerKey;
        refuse_at_limit(
            routing_id, encoding, hello.req, hinted,
            per_key ? Metrics::TenantLimit::SessionsPerKey : Metrics::TenantLimit::SessionsPerOrg,
            per_key ? "this key holds " + std::to_string(options_.max_sessions_per_key) +
                          " sessions already; say HELLO again once one has closed"
                    : "this organization holds " + std::to_string(options_.max_sessions_per_org) +
                          " sessions already; say HELLO again later");
        return;
    }
    Session& s = p_.sessions.open(routing_id, hello.worker_id, org, encoding);
    p_.sessions.set_fd(s, fd);
    s.user_id = user_id;
    s.public_key = credentials.public_key;
    p_.sessions.serve(s, std::move(queues));
    p_.metrics.connected_sessions.store(static_cast<std::int64_t>(p_.sessions.size()));
    spdlog::info("session org={} worker={} opened, serving {}", s.org_id, s.worker_id,
                 fmt::join(s.queues, ","));
    proto::Welcome welcome;
    welcome.req = hello.req;
    welcome.org_id = s.org_id;
    welcome.lease_ms = options_.lease_ms;
    welcome.heartbeat_ms = options_.effective_heartbeat_ms();
    welcome.max_body_bytes = static_cast<std::uint32_t>(options_.max_body_bytes);
    // Only what was asked for is granted, so a worker that asked for nothing gets a WELCOME of
    // protocol 1.1, byte for byte.
    for (const auto& feature : hello.features) {
        const bool known = feature == proto::kFeatureCompleteClaim ||
                           feature == proto::kFeatureRenewHeld ||
                           feature == proto::kFeatureReconnectHints ||
                           feature == proto::kFeatureProgress || feature == proto::kFeaturePark;
        if (known && std::find(welcome.features.begin(), welcome.features.end(), feature) ==
                         welcome.features.end()) {
            welcome.features.push_back(feature);
        }
    }
    // Protocol 1.4: how many sessions this coordinator has, this one included, which is how
    // many workers would come back at once if it went away.
    s.reconnect_hints = std::find(welcome.features.begin(), welcome.features.end(),
                                  proto::kFeatureReconnectHints) != welcome.features.end();
    if (s.reconnect_hints) welcome.sessions = static_cast<std::int64_t>(p_.sessions.size());
    // Protocol 1.5: ASSIGNED carries saved progress (`resume`) only where it was granted.
    s.progress = std::find(welcome.features.begin(), welcome.features.end(),
                           proto::kFeatureProgress) != welcome.features.end();
    p_.replier.send(routing_id, welcome, encoding);
}

void Inbound::handle_bye(const std::string& routing_id) {
    // The peer is leaving: its parked claims have nobody to answer to.
    p_.parked.take_connection(routing_id);
    if (const Session* s = p_.sessions.find(routing_id)) {
        spdlog::info("session org={} worker={} closed by BYE", s->org_id, s->worker_id);
    }
    p_.sessions.close(routing_id);
    p_.metrics.connected_sessions.store(static_cast<std::int64_t>(p_.sessions.size()));
}

}  // namespace aclaim::coordinator
