#pragma once

// How long an operator's program (aclaimctl, aclaim-console) waits on its database: the flags of
// add_database_deadlines() (cli_flags.hpp) fill it, store::bounded_dsn() (store/conninfo.hpp)
// writes it into the connection string. A database that accepts TCP and never answers then fails
// the call within the bound instead of holding it for good.

namespace aclaim::base {

struct DatabaseDeadlines {
    /// Seconds libpq may spend connecting to each host address (--connect-timeout).
    int connect_timeout_s = 10;
    /// Seconds any one statement may run on the server (--statement-timeout; 0: no limit).
    int statement_timeout_s = 60;
};

/// Whether a connection's statements get the statement deadline: a migration (an ALTER of a big
/// table) may rightly run long and gets the connect deadline only.
enum class Statements { kBounded, kUnbounded };

}  // namespace aclaim::base
