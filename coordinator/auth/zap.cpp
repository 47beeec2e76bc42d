#include "coordinator/auth/zap.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <pqxx/pqxx>
#include <stdexcept>
#include <unordered_set>
#include <vector>
#include <zmq_addon.hpp>

#include "common/ops/worker_keys.hpp"
#include "coordinator/db/mailbox.hpp"
#include "coordinator/router/accept_monitor.hpp"

namespace aclaim::coordinator {

namespace {

constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";
/// Longest wait for a request: bounds how late stop() is noticed.
constexpr int kPollMs = 100;
/// A cache that only grows with distinct accepted keys still gets a bound: beyond it, start over.
constexpr std::size_t kMaxCached = 100000;
/// Every ZAP request has these frames (RFC 27): version, request id, domain, address, identity,
/// mechanism, then the mechanism's credentials (for CURVE, the 32-byte client public key).
constexpr std::size_t kZapFrames = 7;
/// Handshakes answered per round at most, their keys looked up in one query.
constexpr std::size_t kMaxZapBatch = 512;

/// The ZAP reply's metadata frame (RFC 27, ZMTP 3.0 metadata): each property is a one-byte name
/// length, the name, a four-byte big-endian value length and the value.
std::string metadata(std::string_view name, std::string_view value) {
    std::string out;
    out += static_cast<char>(name.size());
    out += name;
    const auto n = static_cast<std::uint32_t>(value.size());
    for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((n >> shift) & 0xff);
    out += value;
    return out;
}

std::string z85(const std::string& binary) {
    std::array<char, 41> out{};
    if (binary.size() != 32 ||
        zmq_z85_encode(out.data(), reinterpret_cast<const std::uint8_t*>(binary.data()), 32) ==
            nullptr) {
        return {};
    }
    return std::string(out.data(), 40);
}

}  // namespace

std::string KeyIdentity::user_id() const {
    return std::to_string(org_id) + ":" + name;
}

std::optional<KeyIdentity> KeyIdentity::parse(std::string_view user_id) {
    const auto colon = user_id.find(':');
    if (colon == std::string_view::npos || colon + 1 == user_id.size()) return std::nullopt;
    KeyIdentity id;
    const auto digits = user_id.substr(0, colon);
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), id.org_id);
    if (ec != std::errc{} || end != digits.data() + digits.size() || id.org_id <= 0) {
        return std::nullopt;
    }
    id.name = std::string(user_id.substr(colon + 1));
    return id;
}

std::string curve_public_of(const std::string& secret_z85) {
    std::array<char, 41> pub{};
    if (secret_z85.size() != 40 || zmq_curve_public(pub.data(), secret_z85.c_str()) != 0) {
        throw std::invalid_argument("the CURVE secret key must be 40 characters of Z85");
    }
    return std::string(pub.data(), 40);
}

ZapHandler::ZapHandler(zmq::context_t& context, const ZapOptions& options,
                       const Connections& connections, AuthCounters& counters,
                       const base::Clock& clock)
    : connections_(connections),
      cache_ttl_(options.key_cache()),
      socket_(context, zmq::socket_type::router),
      counters_(counters),
      clock_(clock) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.bind(kZapEndpoint);
}

ZapHandler::~ZapHandler() {
    stop();
}

void ZapHandler::start(Mailbox* mailbox) {
    thread_ = std::thread([this, mailbox] { serve(mailbox); });
}

void ZapHandler::stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
    socket_.close();
}

void ZapHandler::serve(Mailbox* mailbox) {
    // A Poster's socket belongs to the thread that uses it: this one.
    std::optional<Poster> poster;
    if (mailbox != nullptr) poster.emplace(*mailbox);
    const auto every = std::max<std::chrono::milliseconds>(
        cache_ttl_, std::chrono::milliseconds(1000 / kMaxRechecksPerSecond));
    auto next_recheck = clock_.monotonic_now() + every;
    zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
    while (!stop_.load()) {
        try {
            auto now = clock_.monotonic_now();
            if (poster && now >= next_recheck) {
                recheck(*poster);
                now = clock_.monotonic_now();
                next_recheck = now + every;
            }
            const auto wait =
                std::clamp(std::chrono::ceil<std::chrono::milliseconds>(next_recheck - now),
                           std::chrono::milliseconds(0), std::chrono::milliseconds(kPollMs));
            if (zmq::poll(&item, 1, wait) > 0) answer_batch();
        } catch (const zmq::error_t& e) {
            // A context being terminated ends the handler; anything else is one request lost,
            // which libzmq treats as a refused handshake.
            if (e.num() == ETERM) return;
            spdlog::error("ZAP handler: {}", e.what());
        }
    }
}

void ZapHandler::answer_batch() {
    // A ROUTER rather than a REP: every handshake waiting is read at once, the keys that are not
    // cached are looked up in one query, and each is answered. After a restart thousands of
    // workers reconnect together; one query each, answered in turn, held the later handshakes
    // past the handshake timeout, and every one dropped came back to be done again.
    struct Request {
        zmq::message_t peer;
        std::string version = "1.0";
        std::string request_id;
        std::string key;  ///< Z85; empty: not a CURVE ZAP 1.0 request
        std::string address;
        std::size_t frames = 0;
    };
    std::vector<Request> batch;
    while (batch.size() < kMaxZapBatch) {
        std::vector<zmq::message_t> parts;
        if (!zmq::recv_multipart(socket_, std::back_inserter(parts), zmq::recv_flags::dontwait)) {
            break;
        }
        // The peer's routing id, the empty delimiter, then the request's frames.
        if (parts.size() < 2) continue;
        Request r;
        r.peer = std::move(parts[0]);
        const std::size_t first = 2;
        r.frames = parts.size() - first;
        if (r.frames > 0) r.version = parts[first].to_string();
        if (r.frames > 1) r.request_id = parts[first + 1].to_string();
        if (r.frames == kZapFrames && r.version == "1.0" &&
            parts[first + 5].to_string_view() == "CURVE") {
            r.key = z85(parts[first + 6].to_string());
            r.address = parts[first + 3].to_string();
        }
        batch.push_back(std::move(r));
    }
    if (batch.empty()) return;
    const auto now = clock_.monotonic_now();
    std::vector<std::string> misses;
    for (const auto& r : batch) {
        if (r.key.empty()) continue;
        const auto it = cache_.find(r.key);
        if (it != cache_.end() && now - it->second.fetched_at < cache_ttl_) continue;
        if (std::find(misses.begin(), misses.end(), r.key) == misses.end()) misses.push_back(r.key);
    }
    std::unordered_map<std::string, KeyIdentity> found;
    bool failed = false;
    if (!misses.empty()) {
        try {
            found = look_up(misses);
        } catch (const std::exception& e) {
            conn_.reset();
            failed = true;
            spdlog::error("{} handshakes refused: cannot look up their keys: {}", misses.size(),
                          e.what());
        }
    }
    for (auto& r : batch) {
        std::string status = "400";
        std::string text = "refused";
        std::string user_id;
        std::string properties;
        if (!r.key.empty()) {
            KeyIdentity identity;
            switch (check(r.key, found, failed, now, identity)) {
                case Verdict::Accepted:
                    // At the descriptor limit less its reserve, the keys that are connected
                    // already wait: the descriptors left are for those that are not.
                    if (budget_ != nullptr && !budget_->admits(identity.org_id, identity.name)) {
                        status = "300";
                        text = "at the connection limit; this key is connected already";
                        counters_.refused.fetch_add(1, std::memory_order_relaxed);
                        spdlog::debug(
                            "handshake from {} refused: key {} is connected and only "
                            "the descriptor reserve is left",
                            r.address, r.key);
                        break;
                    }
                    status = "200";
                    text = "OK";
                    user_id = identity.user_id();
                    // Every message of the connection carries its key, so that the router thread
                    // can tell which open connections a revocation concerns.
                    properties =
                        metadata(kKeyProperty, r.key) + metadata(kQueuesProperty, identity.queues);
                    counters_.accepted.fetch_add(1, std::memory_order_relaxed);
                    spdlog::debug("handshake from {} accepted as {}", r.address, user_id);
                    break;
                case Verdict::Refused:
                    counters_.refused.fetch_add(1, std::memory_order_relaxed);
                    // Public keys are not secrets; logging them lets an operator find the worker.
                    spdlog::warn(
                        "handshake from {} refused: key {} is not registered or is revoked",
                        r.address, r.key);
                    break;
                case Verdict::Failed:
                    status = "500";
                    text = "key lookup failed";
                    counters_.failed.fetch_add(1, std::memory_order_relaxed);
                    break;
            }
        } else {
            counters_.refused.fetch_add(1, std::memory_order_relaxed);
            spdlog::warn("handshake refused: not a CURVE ZAP 1.0 request ({} frames)", r.frames);
        }
        // A REP socket must answer every request, and so must this: malformed ones are refused
        // with what they carry.
        const std::array<std::string, 6> reply{"1.0", r.request_id, status,
                                               text,  user_id,      properties};
        socket_.send(r.peer, zmq::send_flags::sndmore);
        socket_.send(zmq::const_buffer(nullptr, 0), zmq::send_flags::sndmore);
        for (std::size_t i = 0; i < reply.size(); ++i) {
            socket_.send(zmq::buffer(reply[i]),
                         i + 1 < reply.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
        }
    }
}

ZapHandler::Verdict ZapHandler::check(const std::string& key,
                                      const std::unordered_map<std::string, KeyIdentity>& found,
                                      bool lookup_failed, base::MonotonicTime now,
                                      KeyIdentity& identity) {
    if (const auto it = cache_.find(key); it != cache_.end()) {
        if (now - it->second.fetched_at < cache_ttl_) {
            identity = it->second.identity;
            watched_.try_emplace(key, identity);
            return Verdict::Accepted;
        }
        cache_.erase(it);
    }
    if (lookup_failed) return Verdict::Failed;
    const auto owner = found.find(key);
    if (owner == found.end()) return Verdict::Refused;
    if (cache_.size() >= kMaxCached) cache_.clear();
    cache_[key] = Cached{owner->second, now};
    if (watched_.size() >= kMaxCached) {
        // Beyond the bound, forget the live keys (they come back with their next handshake) but
        // keep the revoked ones, whose connections must stay cut off.
        const std::unordered_set<std::string> revoked(revoked_.begin(), revoked_.end());
        std::erase_if(watched_, [&](const auto& w) { return revoked.count(w.first) == 0; });
    }
    watched_[key] = owner->second;
    identity = owner->second;
    return Verdict::Accepted;
}

pqxx::connection& ZapHandler::connection() {
    if (!conn_) conn_ = connections_.open("aclaim-coordinator-zap", Connections::Role::Login);
    return *conn_;
}

std::unordered_map<std::string, KeyIdentity> ZapHandler::look_up(
    const std::vector<std::string>& keys) {
    counters_.lookups.fetch_add(1, std::memory_order_relaxed);
    pqxx::read_transaction txn(connection());
    std::unordered_map<std::string, KeyIdentity> out;
    for (auto& [key, owner] : ops::live_worker_key_owners(txn, keys)) {
        std::string queues;
        for (const auto& q : owner.queues.value_or(std::vector<std::string>{})) {
            queues += (queues.empty() ? "" : ",") + q;
        }
        out.emplace(key, KeyIdentity{owner.org_id, owner.name, queues});
    }
    return out;
}

void ZapHandler::recheck(Poster& poster) {
    if (watched_.empty()) return;
    std::vector<std::string> keys;
    keys.reserve(watched_.size());
    for (const auto& [key, identity] : watched_) keys.push_back(key);
    std::unordered_set<std::string> live;
    counters_.lookups.fetch_add(1, std::memory_order_relaxed);
    try {
        pqxx::read_transaction txn(connection());
        live = ops::live_worker_keys(txn, keys);
    } catch (const std::exception& e) {
        // Nothing is known: keep the last verdict and ask again next time.
        conn_.reset();
        spdlog::warn("cannot re-check the keys of open connections: {}", e.what());
        return;
    }
    std::vector<std::string> revoked;
    for (const auto& key : keys) {
        if (live.count(key) != 0) continue;
        revoked.push_back(key);
        // New handshakes with it are refused from now on, not only once the cache entry expires.
        cache_.erase(key);
        if (std::find(revoked_.begin(), revoked_.end(), key) == revoked_.end()) {
            const auto& who = watched_.at(key);
            spdlog::warn(
                "key {} of org={} name={} is no longer live in worker_keys: its open "
                "connections are cut off",
                key, who.org_id, who.name);
        }
    }
    std::sort(revoked.begin(), revoked.end());
    if (revoked == revoked_) return;
    revoked_ = revoked;
    poster.post(KeysRevoked{std::move(revoked)});
}

}  // namespace aclaim::coordinator
