#include "coordinator/http/callback.hpp"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "common/store/park_sql.hpp"
#include "coordinator/http/readiness.hpp"

namespace aclaim::coordinator {

namespace {

using nlohmann::json;

CallbackReply reply(int status, const json& body, bool accepted = false) {
    return {status, body.dump(), accepted};
}

CallbackReply refused(int status, std::string_view reason, std::string_view detail) {
    return reply(status, json{{"accepted", false}, {"reason", reason}, {"detail", detail}});
}

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

}  // namespace

ParkCallback::ParkCallback(const std::string& dsn, const common::Clock& clock)
    : dsn_(with_connect_timeout(dsn, kTimeoutSeconds)), clock_(clock) {}

CallbackReply ParkCallback::handle(const CallbackRequest& request) const {
    const std::string& body = request.body;
    const std::string& peer = request.peer;
    const std::string token = bearer_token(request.authorization);
    if (token.empty()) {
        return refused(401, "unauthenticated",
                       "send the park's callback token as 'Authorization: Bearer <token>'");
    }
    if (body.size() > kMaxBodyBytes) {
        return refused(413, "oversized",
                       "the body is over " + std::to_string(kMaxBodyBytes) + " bytes");
    }
    std::string outcome;
    std::string result;
    try {
        const json doc = json::parse(body);
        if (!doc.is_object()) throw json::type_error::create(302, "not an object", nullptr);
        outcome = doc.at("outcome").get<std::string>();
        if (doc.contains("result")) result = doc.at("result").get<std::string>();
    } catch (const json::exception&) {
        return refused(400, "invalid",
                       "the body must be a JSON object {\"outcome\": \"completed\" | \"failed\" | "
                       "\"retry\", \"result\": \"...\"}");
    }
    try {
        pqxx::connection conn(dsn_);
        pqxx::work txn(conn, "park_callback");
        txn.exec("SET LOCAL statement_timeout = '" + std::to_string(kTimeoutSeconds) + "s'");
        const auto& s = common::sql::kFinishParked;
        const pqxx::row row = txn.exec_params1(s.text, token, outcome, result,
                                               common::to_micros(clock_.now()), "http " + peer);
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
    } catch (const pqxx::data_exception& e) {
        // The function's own checks (outcome, result's length): the request, not the token.
        return refused(400, "invalid", e.what());
    } catch (const pqxx::sql_error& e) {
        if (e.sqlstate() == "22023" || e.sqlstate() == "54000") {
            return refused(400, "invalid", e.what());
        }
        spdlog::warn("callback peer={}: {}", peer, e.what());
        return refused(503, "unavailable", "the database refused the callback; send it again");
    } catch (const std::exception& e) {
        spdlog::warn("callback peer={}: {}", peer, e.what());
        return refused(503, "unavailable", "the database is unreachable; send it again");
    }
}

}  // namespace aclaim::coordinator
