#include "coordinator/db/connections.hpp"

#include <pqxx/pqxx>

#include "common/store/session_sql.hpp"
#include "common/store/store_sql.hpp"

namespace aclaim::coordinator {

Connections::Connections(ConnectionOptions options, StatementWatchdog& watchdog)
    : options_(std::move(options)), dsn_(options_.guarded_dsn()), watchdog_(watchdog) {}

std::unique_ptr<pqxx::connection> Connections::open(const std::string& application_name,
                                                    Role role) const {
    auto conn = std::make_unique<pqxx::connection>(dsn_);
    {
        pqxx::nontransaction session(*conn);
        session.exec_params(store::sql::kSetApplicationName.text, application_name);
    }
    if (role == Role::RowSecurity && options_.row_security) {
        store::act_as_row_security_role(*conn);
        // A raw connection has no per-transaction scope: every organization, for the session.
        pqxx::nontransaction session(*conn);
        session.exec_params(store::sql::kSetSessionOrg.text, store::sql::kAllOrganizations);
    }
    return conn;
}

std::unique_ptr<StoreHandle> Connections::store(store::StoreOptions options,
                                                const base::Clock& clock) const {
    options.row_security = options_.row_security;
    return std::make_unique<StoreHandle>(dsn_, std::move(options), clock);
}

std::shared_ptr<StatementWatchdog::Watch> Connections::watch(std::string name) const {
    return watchdog_.watch(std::move(name));
}

base::MonotonicTime Connections::deadline_from_now() const {
    return watchdog_.clock().monotonic_now() + deadline();
}

}  // namespace aclaim::coordinator
