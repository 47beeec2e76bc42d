#include "coordinator/zap.hpp"

#include <spdlog/spdlog.h>

#include <array>
#include <charconv>
#include <pqxx/pqxx>
#include <stdexcept>
#include <vector>
#include <zmq_addon.hpp>

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

std::string KeyIdentity::user_id() const { return std::to_string(org_id) + ":" + name; }

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

ZapHandler::ZapHandler(zmq::context_t& context, std::string dsn,
                       std::chrono::milliseconds cache_ttl)
    : dsn_(std::move(dsn)), cache_ttl_(cache_ttl), socket_(context, zmq::socket_type::rep) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.bind(kZapEndpoint);
}

ZapHandler::~ZapHandler() { stop(); }

void ZapHandler::start() {
    thread_ = std::thread([this] { serve(); });
}

void ZapHandler::stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
    socket_.close();
}

void ZapHandler::serve() {
    zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
    while (!stop_.load()) {
        try {
            if (zmq::poll(&item, 1, std::chrono::milliseconds(kPollMs)) > 0) answer_one();
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
    if (request.size() == kZapFrames && version == "1.0" && request[5].to_string_view() == "CURVE") {
        const std::string key = z85(request[6].to_string());
        const std::string address = request[3].to_string();
        KeyIdentity identity;
        switch (check(key, identity)) {
        case Verdict::Accepted:
            status = "200";
            text = "OK";
            user_id = identity.user_id();
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
    const std::array<std::string, 6> reply{"1.0", request_id, status, text, user_id, ""};
    for (std::size_t i = 0; i < reply.size(); ++i) {
        socket_.send(zmq::buffer(reply[i]),
                     i + 1 < reply.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
}

ZapHandler::Verdict ZapHandler::check(const std::string& key, KeyIdentity& identity) {
    if (key.empty()) return Verdict::Refused;
    const auto now = std::chrono::steady_clock::now();
    if (const auto it = cache_.find(key); it != cache_.end()) {
        if (now - it->second.fetched_at < cache_ttl_) {
            identity = it->second.identity;
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
    identity = std::move(*found);
    return Verdict::Accepted;
}

std::optional<KeyIdentity> ZapHandler::look_up(const std::string& key) {
    counters_.lookups.fetch_add(1, std::memory_order_relaxed);
    if (!conn_) conn_ = std::make_unique<pqxx::connection>(dsn_);
    pqxx::read_transaction txn(*conn_);
    const auto rows = txn.exec_params(
        "SELECT org_id, name FROM worker_keys WHERE public_key = $1 AND revoked_at IS NULL", key);
    if (rows.empty()) return std::nullopt;
    return KeyIdentity{rows[0][0].as<common::OrgId>(), rows[0][1].as<std::string>()};
}

}  // namespace aclaim::coordinator
