#include "common/store/conninfo.hpp"

#include <libpq-fe.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace aclaim::store {

namespace {

bool is_uri(const std::string& dsn) {
    return dsn.rfind("postgresql://", 0) == 0 || dsn.rfind("postgres://", 0) == 0;
}

/// Seconds for libpq's connect_timeout, which counts whole seconds and treats 1 as 2.
int connect_timeout_seconds(std::chrono::milliseconds deadline) {
    const auto seconds = std::chrono::ceil<std::chrono::seconds>(deadline).count();
    return static_cast<int>(std::max<long long>(2, seconds));
}

// Keepalive probes start after this many idle seconds and repeat every kKeepaliveInterval; a
// route that stays dead through kKeepaliveCount of them closes the connection. tcp_user_timeout
// caps how long sent data may stay unacknowledged, and so the whole probing as well.
constexpr int kKeepaliveIdle = 5;
constexpr int kKeepaliveInterval = 2;
constexpr int kKeepaliveCount = 3;
constexpr int kTcpUserTimeoutMs = 10'000;

bool environment_sets(const char* variable) {
    const char* value = std::getenv(variable);
    return value != nullptr && *value != '\0';
}

}  // namespace

bool names_setting(const std::string& dsn, std::string_view key) {
    const bool uri = is_uri(dsn);
    for (std::size_t at = dsn.find(key); at != std::string::npos; at = dsn.find(key, at + 1)) {
        const char before = at == 0 ? ' ' : dsn[at - 1];
        const bool starts = uri ? (before == '?' || before == '&')
                                : std::isspace(static_cast<unsigned char>(before)) != 0;
        if (!starts) continue;
        std::size_t after = at + key.size();
        while (!uri && after < dsn.size() && std::isspace(static_cast<unsigned char>(dsn[after])))
            ++after;
        if (after < dsn.size() && dsn[after] == '=') return true;
    }
    return false;
}

std::string with_setting(const std::string& dsn, std::string_view key, const std::string& value) {
    if (names_setting(dsn, key)) return dsn;
    const std::string setting = std::string(key) + "=" + value;
    if (!is_uri(dsn)) return dsn.empty() ? setting : dsn + " " + setting;
    return dsn + (dsn.find('?') == std::string::npos ? "?" : "&") + setting;
}

std::string guarded_dsn(const std::string& dsn, std::chrono::milliseconds deadline) {
    std::string out =
        with_setting(dsn, "connect_timeout", std::to_string(connect_timeout_seconds(deadline)));
    out = with_setting(out, "keepalives", "1");
    out = with_setting(out, "keepalives_idle", std::to_string(kKeepaliveIdle));
    out = with_setting(out, "keepalives_interval", std::to_string(kKeepaliveInterval));
    out = with_setting(out, "keepalives_count", std::to_string(kKeepaliveCount));
    out = with_setting(out, "tcp_user_timeout", std::to_string(kTcpUserTimeoutMs));
    // A coordinator only ever writes: of several hosts, only the writable primary will do.
    return with_setting(out, "target_session_attrs", "read-write");
}

std::optional<std::string> conninfo_refusal(const std::string& dsn) {
    char* error = nullptr;
    PQconninfoOption* parsed = PQconninfoParse(dsn.c_str(), &error);
    if (parsed != nullptr) {
        PQconninfoFree(parsed);
        return std::nullopt;
    }
    std::string why = error != nullptr ? error : "cannot be parsed";
    PQfreemem(error);
    while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
    return why;
}

std::string bounded_dsn(const std::string& dsn, const base::DatabaseDeadlines& deadlines,
                        base::Statements statements) {
    std::string out = dsn;
    if (!environment_sets("PGCONNECT_TIMEOUT"))
        out = with_setting(out, "connect_timeout", std::to_string(deadlines.connect_timeout_s));
    if (statements == base::Statements::kBounded && deadlines.statement_timeout_s > 0 &&
        !environment_sets("PGOPTIONS")) {
        const std::string ms = std::to_string(deadlines.statement_timeout_s * 1000);
        out = with_setting(
            out, "options",
            is_uri(out) ? "-c%20statement_timeout%3D" + ms : "'-c statement_timeout=" + ms + "'");
    }
    out = with_setting(out, "keepalives", "1");
    out = with_setting(out, "keepalives_idle", std::to_string(kKeepaliveIdle));
    out = with_setting(out, "keepalives_interval", std::to_string(kKeepaliveInterval));
    return with_setting(out, "keepalives_count", std::to_string(kKeepaliveCount));
}

}  // namespace aclaim::store
