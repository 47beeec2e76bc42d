#include "coordinator/http/callback.hpp"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>
#include <variant>

#include "common/base/bounded_json.hpp"
#include "common/store/conninfo.hpp"
#include "common/store/park_sql.hpp"
#include "common/store/session_sql.hpp"
#include "coordinator/http/readiness.hpp"

namespace aclaim::coordinator {

namespace {

using nlohmann::json;

constexpr const char* kApplicationName = "aclaim-coordinator-callback";

CallbackReply reply(int status, const json& body, bool accepted = false) {
    return {status, body.dump(), accepted};
}

CallbackReply refused(int status, std::string_view reason, std::string_view detail) {
    return reply(status, json{{"accepted", false}, {"reason", reason}, {"detail", detail}});
}

const std::string kShape =
    "the body must be a JSON object {\"outcome\": \"completed\" | \"failed\" | \"retry\", "
    "\"result\": \"...\"}";

/// The token of an "Authorization: Bearer <token>" header, or "" when there is none.
std::string bearer_token(const std::string& authorization) {
    constexpr std::string_view kScheme = "Bearer ";
    if (authorization.size() <= kScheme.size()) return "";
    for (std::size_t i = 0; i < kScheme.size(); ++i) {
        if (std::tolower(static_cast<unsigned char>(authorization[i])) !=
            std::tolower(static_cast<unsigned char>(kScheme[i]))) {
            return "";
        }
    }
    std::string token = authorization.substr(kScheme.size());
    while (!token.empty() && token.back() == ' ') token.pop_back();
    return token;
}

/// The HTTP status of a refusal named by aclaim_finish_parked.
int status_of(std::string_view reason) {
    if (reason == "unknown_token" || reason == "other_organization") return 401;
    return 409;  // replayed, stale, deadline_passed: the token was real but is spent
}

/// What the body asks, checked here against what aclaim_finish_parked accepts, so that a bad
/// body is answered in this program's words and never reaches the database.
struct Outcome {
    std::string outcome;
    std::string result;
};

std::variant<Outcome, std::string> outcome_of(const std::string& body) {
    Outcome o;
    json doc;
    try {
        doc = base::parse_bounded_json(body);
    } catch (const json::parse_error&) {
        return kShape;
    }
    if (!doc.is_object() || !doc.contains("outcome") || !doc["outcome"].is_string()) return kShape;
    o.outcome = doc["outcome"].get<std::string>();
    if (doc.contains("result")) {
        if (!doc["result"].is_string()) return kShape;
        o.result = doc["result"].get<std::string>();
    }
    if (o.outcome != "completed" && o.outcome != "failed" && o.outcome != "retry") {
        return "outcome must be completed, failed or retry";
    }
    if (o.outcome == "completed" && o.result.empty()) {
        return "a completion needs its result reference (\"result\": \"...\")";
    }
    if (o.result.size() > ParkCallback::kMaxResultBytes) {
        return "result is " + std::to_string(o.result.size()) + " bytes, over the limit of " +
               std::to_string(ParkCallback::kMaxResultBytes);
    }
    if (o.result.find('\0') != std::string::npos) return "result contains a NUL character";
    return o;
}

}  // namespace

ParkCallback::ParkCallback(const std::string& dsn, const base::Clock& clock, CallbackLimits limits)
    : dsn_(store::with_setting(with_connect_timeout(dsn, kTimeoutSeconds), "application_name",
                               kApplicationName)),
      clock_(clock),
      limiter_(limits, clock) {}

ParkCallback::~ParkCallback() = default;

std::int64_t ParkCallback::connections_opened() const {
    const std::lock_guard lock(mutex_);
    return opened_;
}

std::unique_ptr<pqxx::connection> ParkCallback::take() {
    // Real time: how long a caller waits for a connection is not the callbacks' clock's business.
    const base::Clock& real = base::real_time();
    std::unique_lock lock(mutex_);
    const auto deadline = real.monotonic_now() + std::chrono::seconds(kTimeoutSeconds);
    while (idle_.empty() && open_ >= kMaxConnections) {
        if (real.monotonic_now() >= deadline) return nullptr;
        real.wait_until(freed_, lock, deadline);
    }
    if (!idle_.empty()) {
        auto conn = std::move(idle_.back());
        idle_.pop_back();
        return conn;
    }
    // Connecting happens outside the lock, its place held meanwhile.
    ++open_;
    ++opened_;
    lock.unlock();
    try {
        auto conn = std::make_unique<pqxx::connection>(dsn_);
        pqxx::nontransaction setup(*conn);
        setup.exec_params(store::sql::kSetStatementTimeout.text,
                          std::to_string(kTimeoutSeconds * 1000));
        conn->prepare(store::sql::kFinishParked.name, store::sql::kFinishParked.text);
        return conn;
    } catch (...) {
        give_back(nullptr);
        throw;
    }
}

void ParkCallback::give_back(std::unique_ptr<pqxx::connection> conn) {
    {
        const std::lock_guard lock(mutex_);
        if (conn && conn->is_open()) {
            idle_.push_back(std::move(conn));
        } else {
            --open_;
        }
    }
    freed_.notify_one();
}

CallbackReply ParkCallback::decide(pqxx::connection& conn, const std::string& token,
                                   const std::string& outcome, const std::string& result,
                                   const std::string& peer) {
    pqxx::work txn(conn, "park_callback");
    const pqxx::row row =
        txn.exec_prepared1(store::sql::kFinishParked.name, token, outcome, result,
                           base::to_micros(clock_.now()), "http " + callback_source(peer));
    txn.commit();
    const bool accepted = row["accepted"].as<bool>();
    const std::string reason = row["reason"].as<std::string>();
    const std::string detail = row["detail"].is_null() ? "" : row["detail"].as<std::string>();
    json out{{"accepted", accepted}, {"reason", reason}, {"detail", detail}};
    if (!row["job_id"].is_null()) out["job_id"] = row["job_id"].as<std::int64_t>();
    if (!row["state"].as<std::string>().empty()) out["state"] = row["state"].as<std::string>();
    spdlog::info("callback peer={} job={} outcome={} {}", peer,
                 row["job_id"].is_null() ? std::string("none") : row["job_id"].c_str(), outcome,
                 accepted ? "accepted" : "refused:" + reason);
    return reply(accepted ? 200 : status_of(reason), out, accepted);
}

CallbackReply ParkCallback::handle(const CallbackRequest& request) {
    const std::string source = callback_source(request.peer);
    if (const auto wait = limiter_.wait_for(source)) {
        CallbackReply r = refused(429, "rate_limited",
                                  "too many refused callbacks from this address; send it again "
                                  "after " +
                                      std::to_string(wait->count()) + " s");
        r.retry_after_s = static_cast<int>(wait->count());
        return r;
    }
    auto refuse = [&](int status, std::string_view reason, const std::string& detail) {
        limiter_.refused(source);
        return refused(status, reason, detail);
    };
    const std::string token = bearer_token(request.authorization);
    if (token.empty()) {
        return refuse(401, "unauthenticated",
                      "send the park's callback token as 'Authorization: Bearer <token>'");
    }
    if (request.body.size() > kMaxBodyBytes) {
        return refuse(413, "oversized",
                      "the body is over " + std::to_string(kMaxBodyBytes) + " bytes");
    }
    auto asked = outcome_of(request.body);
    if (const auto* why = std::get_if<std::string>(&asked)) return refuse(400, "invalid", *why);
    const Outcome& o = std::get<Outcome>(asked);

    std::unique_ptr<pqxx::connection> conn;
    try {
        conn = take();
    } catch (const std::exception& e) {
        spdlog::warn("callback peer={}: cannot connect: {}", request.peer, e.what());
        return refused(503, "unavailable", "the database is unreachable; send it again");
    }
    if (!conn) {
        return refused(503, "unavailable", "every callback connection is busy; send it again");
    }
    try {
        CallbackReply r = decide(*conn, token, o.outcome, o.result, request.peer);
        give_back(std::move(conn));
        if (!r.accepted) limiter_.refused(source);
        return r;
    } catch (const pqxx::sql_error& e) {
        // The database's own words (its CONTEXT names functions and lines) stay in this log; the
        // caller is told what it can act on.
        spdlog::warn("callback peer={}: {} ({})", request.peer, e.what(), e.sqlstate());
        const bool request_fault =
            e.sqlstate().rfind("22", 0) == 0 || e.sqlstate() == "54000";  // data, limits
        give_back(std::move(conn));
        if (request_fault) return refuse(400, "invalid", kShape);
        return refused(503, "unavailable", "the database refused the callback; send it again");
    } catch (const std::exception& e) {
        spdlog::warn("callback peer={}: {}", request.peer, e.what());
        // A connection that failed mid-call is not reused: it may be broken or in doubt.
        give_back(nullptr);
        return refused(503, "unavailable", "the database is unreachable; send it again");
    }
}

}  // namespace aclaim::coordinator
