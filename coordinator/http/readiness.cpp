#include "coordinator/http/readiness.hpp"

#include <pqxx/pqxx>

#include "common/store/conninfo.hpp"
#include "common/store/migrations.hpp"

namespace aclaim::coordinator {

std::string with_connect_timeout(const std::string& dsn, int seconds) {
    return common::with_setting(dsn, "connect_timeout", std::to_string(seconds));
}

ReadinessProbe::ReadinessProbe(const std::string& dsn, const common::Clock& clock,
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
            session.exec("SET statement_timeout = '" + std::to_string(kTimeoutSeconds) + "s'");
        }
        const int have = common::schema_version(conn);
        const int want = common::embedded_migrations().back().version;
        if (!common::migrations_current(conn)) {
            return {false, "database reachable but the schema is at version " +
                               std::to_string(have) + " of " + std::to_string(want) +
                               ": run aclaimctl migrate"};
        }
        return {true, "database reachable, schema at version " + std::to_string(have)};
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
