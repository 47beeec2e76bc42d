#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "common/base/clock.hpp"
#include "common/store/assignment_store.hpp"
#include "coordinator/db/statement_watchdog.hpp"
#include "coordinator/db/store_handle.hpp"
#include "coordinator/options.hpp"

namespace aclaim::coordinator {

/// The one way a coordinator thread opens a database connection: the guarded DSN (computed once,
/// with its connect timeout and keepalives), the thread's application_name, row security switched
/// on the one way (store::act_as_row_security_role) when the options say so, and the thread's
/// slot on the statement watchdog. The DB threads, the reaper, retention, the presence publisher,
/// the result notifier, the listener and the ZAP handler all come here.
class Connections {
  public:
    /// Whether a raw connection acts as the row-security role (every organization in scope) or
    /// as the login: the result notifier touches no table.
    enum class Role { Login, RowSecurity };

    /// The watchdog must outlive the factory and every connection it opened.
    Connections(ConnectionOptions options, StatementWatchdog& watchdog);

    /// A connection named `application_name`, acting as `role` (the login when row security is
    /// off). Throws what libpqxx throws; a login that cannot act as the role gets a
    /// std::runtime_error naming the remedy.
    std::unique_ptr<pqxx::connection> open(const std::string& application_name, Role role) const;
    /// A reconnecting store connection with `options`' application name, under row security when
    /// it is on.
    std::unique_ptr<StoreHandle> store(store::StoreOptions options, const base::Clock& clock) const;
    /// The thread's slot on the watchdog, named as its connection.
    std::shared_ptr<StatementWatchdog::Watch> watch(std::string name) const;

    /// How long a statement may run before its connection is cut.
    std::chrono::milliseconds deadline() const { return options_.db_deadline(); }
    /// The deadline's end for a call starting now, on the watchdog's clock.
    base::MonotonicTime deadline_from_now() const;
    bool row_security() const { return options_.row_security; }
    const std::string& dsn() const { return dsn_; }
    StatementWatchdog& watchdog() const { return watchdog_; }

  private:
    ConnectionOptions options_;
    std::string dsn_;  ///< guarded
    StatementWatchdog& watchdog_;
};

}  // namespace aclaim::coordinator
