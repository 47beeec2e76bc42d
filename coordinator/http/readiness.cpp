#include "coordinator/http/readiness.hpp"

#include <pqxx/pqxx>

#include "common/store/conninfo.hpp"
#include "common/store/migrations.hpp"
#include "coordinator/http/http_sql.hpp"

namespace aclaim::coordinator {

std::string with_connect_timeout(const std::string& dsn, int seconds) {
    return store::with_setting(dsn, "connect_timeout", std::to_string(seconds));
}

ReadinessProbe::ReadinessProbe(const std::string& dsn, const base::Clock& clock,
                               std::chrono::milliseconds cache_for)
    : dsn_(with_connect_timeout(dsn, kTimeoutSeconds)), clock_(clock), cache_for_(cache_for) {}

Readiness ReadinessProbe::check() {
    std::lock_guard lock(mutex_);
    const auto now = clock_.monotonic_now();
    if (!checked_ || now - checked_at_ >= cache_for_) {
        last_ = check_now();
        checked_at_ = clock_.monotonic_now();
        checked_ = true;
    }
    return last_;
}

Readiness ReadinessProbe::check_now() const {
    try {
        pqxx::connection conn(dsn_);
        {
            pqxx::nontransaction session(conn);
            session.exec(sql::readiness_session(kTimeoutSeconds));
        }
        {
            // A standby, or a primary an HA manager fenced read-only, answers but cannot take a
            // single claim: not ready until a writable primary is reached.
            pqxx::nontransaction q(conn);
            const auto row = q.exec1(sql::kServerRole);
            if (row[0].as<bool>()) {
                return {false, "database reachable but it is a standby: no writable primary"};
            }
            if (row[1].as<bool>()) {
                return {false, "database reachable but read-only: no writable primary"};
            }
        }
        const int have = store::schema_version(conn);
        const int want = store::latest_schema_version();
        if (!store::migrations_current(conn)) {
            return {false, "database reachable but the schema is at version " +
                               std::to_string(have) + " of " + std::to_string(want) +
                               ": run aclaimctl migrate"};
        }
        pqxx::nontransaction q(conn);
        const auto timeline = q.exec1(sql::kTimeline)[0].as<long long>();
        return {true, "writable primary on timeline " + std::to_string(timeline) +
                          ", schema at version " + std::to_string(have)};
    } catch (const std::exception& e) {
        std::string what = e.what();
        for (char& c : what) {
            if (c == '\n') c = ' ';
        }
        while (!what.empty() && (what.back() == '\n' || what.back() == ' ')) what.pop_back();
        return {false, "database unreachable: " + what};
    }
}

}  // namespace aclaim::coordinator
