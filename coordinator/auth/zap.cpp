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

ZapHandler::ZapHandler(zmq::context_t& context, const ZapOptions& options, AuthCounters& counters,
                       const common::Clock& clock)
    : dsn_(options.dsn),
      cache_ttl_(options.key_cache()),
      socket_(context, zmq::socket_type::rep),
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
            if (zmq::poll(&item, 1, wait) > 0) answer_one();
        } catch (const zmq::error_t& e) {
            // A context being terminated ends the handler; anything else is one request lost,
            // which libzmq treats as a refused handshake.
            if (e.num() == ETERM) return;
            spdlog::error("ZAP handler: {}", e.what());
        }
    }
}

void ZapHandler::answer_one() {
    std::vector<zmq::message_t> request;
    (void)zmq::recv_multipart(socket_, std::back_inserter(request));
    // A REP socket must answer every request; malformed ones are refused with what they carry.
    std::string version = request.size() > 0 ? request[0].to_string() : "1.0";
    std::string request_id = request.size() > 1 ? request[1].to_string() : "";
    std::string status = "400";
    std::string text = "refused";
    std::string user_id;
    std::string properties;
    if (request.size() == kZapFrames && version == "1.0" &&
        request[5].to_string_view() == "CURVE") {
        const std::string key = z85(request[6].to_string());
        const std::string address = request[3].to_string();
        KeyIdentity identity;
        switch (check(key, identity)) {
            case Verdict::Accepted:
                status = "200";
                text = "OK";
                user_id = identity.user_id();
                // Every message of the connection carries its key, so that the router thread can
                // tell which open connections a revocation concerns.
                properties =
                    metadata(kKeyProperty, key) + metadata(kQueuesProperty, identity.queues);
                counters_.accepted.fetch_add(1, std::memory_order_relaxed);
                spdlog::debug("handshake from {} accepted as {}", address, user_id);
                break;
            case Verdict::Refused:
                counters_.refused.fetch_add(1, std::memory_order_relaxed);
                // Public keys are not secrets; logging them lets an operator find the worker.
                spdlog::warn("handshake from {} refused: key {} is not registered or is revoked",
                             address, key);
                break;
            case Verdict::Failed:
                status = "500";
                text = "key lookup failed";
                counters_.failed.fetch_add(1, std::memory_order_relaxed);
                break;
        }
    } else {
        counters_.refused.fetch_add(1, std::memory_order_relaxed);
        spdlog::warn("handshake refused: not a CURVE ZAP 1.0 request ({} frames)", request.size());
    }
    const std::array<std::string, 6> reply{"1.0", request_id, status, text, user_id, properties};
    for (std::size_t i = 0; i < reply.size(); ++i) {
        socket_.send(zmq::buffer(reply[i]),
                     i + 1 < reply.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
}

ZapHandler::Verdict ZapHandler::check(const std::string& key, KeyIdentity& identity) {
    if (key.empty()) return Verdict::Refused;
    const auto now = clock_.monotonic_now();
    if (const auto it = cache_.find(key); it != cache_.end()) {
        if (now - it->second.fetched_at < cache_ttl_) {
            identity = it->second.identity;
            watched_.try_emplace(key, identity);
            return Verdict::Accepted;
        }
        cache_.erase(it);
    }
    std::optional<KeyIdentity> found;
    try {
        found = look_up(key);
    } catch (const std::exception& e) {
        conn_.reset();
        spdlog::error("handshake refused: cannot look up the key: {}", e.what());
        return Verdict::Failed;
    }
    if (!found) return Verdict::Refused;
    if (cache_.size() >= kMaxCached) cache_.clear();
    cache_[key] = Cached{*found, now};
    if (watched_.size() >= kMaxCached) {
        // Beyond the bound, forget the live keys (they come back with their next handshake) but
        // keep the revoked ones, whose connections must stay cut off.
        const std::unordered_set<std::string> revoked(revoked_.begin(), revoked_.end());
        std::erase_if(watched_, [&](const auto& w) { return revoked.count(w.first) == 0; });
    }
    watched_[key] = *found;
    identity = std::move(*found);
    return Verdict::Accepted;
}

pqxx::connection& ZapHandler::connection() {
    if (!conn_) conn_ = std::make_unique<pqxx::connection>(dsn_);
    return *conn_;
}

std::optional<KeyIdentity> ZapHandler::look_up(const std::string& key) {
    counters_.lookups.fetch_add(1, std::memory_order_relaxed);
    pqxx::read_transaction txn(connection());
    const auto owner = common::live_worker_key(txn, key);
    if (!owner) return std::nullopt;
    std::string queues;
    for (const auto& q : owner->queues.value_or(std::vector<std::string>{})) {
        queues += (queues.empty() ? "" : ",") + q;
    }
    return KeyIdentity{owner->org_id, owner->name, queues};
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
        live = common::live_worker_keys(txn, keys);
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
