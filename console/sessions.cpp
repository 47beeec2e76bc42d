#include "console/sessions.hpp"

#include <sodium.h>

#include <algorithm>

#include "common/base/clock.hpp"
#include "console/console_sql.hpp"
#include "console/turn.hpp"

namespace aclaim::console {

namespace {

/// What random_token() makes: 32 bytes in lower-case hex. Anything else is no session, answered
/// without asking the database.
bool is_token(const std::string& token) {
    return token.size() == 64 && std::all_of(token.begin(), token.end(), [](char c) {
               return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
           });
}

}  // namespace

std::string token_hash(const std::string& token) {
    unsigned char digest[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(digest, reinterpret_cast<const unsigned char*>(token.data()), token.size());
    std::string hex(sizeof digest * 2 + 1, '\0');
    sodium_bin2hex(hex.data(), hex.size(), digest, sizeof digest);
    hex.pop_back();
    return hex;
}

Sessions::Sessions(std::string dsn, const base::Clock& clock, base::Duration idle,
                   std::optional<base::Duration> turn_wait)
    : dsn_(std::move(dsn)), clock_(clock), idle_(idle), turn_wait_(turn_wait) {}

Sessions::~Sessions() = default;

template <typename F>
auto Sessions::with_connection(F&& f) -> decltype(f(std::declval<pqxx::connection&>())) {
    return turn_.run(turn_wait_, [&]() -> decltype(f(std::declval<pqxx::connection&>())) {
        try {
            if (!conn_) {
                conn_ = std::make_unique<pqxx::connection>(dsn_);
                pqxx::nontransaction session(*conn_);
                session.exec(sql::kSession);
            }
            return f(*conn_);
        } catch (const pqxx::broken_connection&) {
            // Connect again on the next request rather than fail every one on a dead connection.
            conn_.reset();
            throw;
        }
    });
}

std::string Sessions::open(const Operator& op) {
    auto token = random_token();
    const auto csrf = random_token();
    const auto now = base::to_micros(clock_.now());
    with_connection([&](pqxx::connection& conn) {
        pqxx::work txn(conn, "console_open_session");
        txn.exec_params(sql::kPruneSessions, now, kPruneBatch);
        txn.exec_params(sql::kOpenSession, token_hash(token), op.name, csrf, now,
                        base::to_micros(idle_));
        txn.commit();
    });
    return token;
}

std::optional<Session> Sessions::find(const std::string& token) {
    if (!is_token(token)) return std::nullopt;
    const auto now = base::to_micros(clock_.now());
    return with_connection([&](pqxx::connection& conn) -> std::optional<Session> {
        pqxx::work txn(conn, "console_find_session");
        const auto rows = txn.exec_params(sql::kFindSession, token_hash(token), now,
                                          base::to_micros(idle_), base::to_micros(kTouchStep));
        txn.commit();
        if (rows.empty()) return std::nullopt;
        return Session{operator_of(rows[0]["name"].as<std::string>(), rows[0]["orgs"]),
                       rows[0]["csrf"].as<std::string>()};
    });
}

void Sessions::close(const std::string& token) {
    if (!is_token(token)) return;
    with_connection([&](pqxx::connection& conn) {
        pqxx::work txn(conn, "console_close_session");
        txn.exec_params(sql::kCloseSession, token_hash(token));
        txn.commit();
    });
}

}  // namespace aclaim::console
