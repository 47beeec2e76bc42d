#pragma once

// How a program that reads the database on an operator's behalf (aclaimctl, aclaim-console)
// answers the database's outage: as exit code 3 (common/base/exit_codes.hpp), one line on
// stderr, so that a script tells an outage from a failure of the command.

#include <iostream>
#include <pqxx/pqxx>
#include <string>

#include "common/base/exit_codes.hpp"

namespace aclaim::store {

/// SQLSTATE query_canceled: a statement ran past the connection's statement_timeout.
inline constexpr const char* kStatementTimeoutState = "57014";

/// Runs `body` and returns its exit code; a database that cannot be reached, or whose statement
/// ran past --statement-timeout (`statement_timeout_s`, for the message), is kExitUnreachable
/// with "PROGRAM: why" on stderr. Any other error goes on to the caller.
template <typename Body>
int exit_on_outage(const std::string& program, int statement_timeout_s, Body&& body) {
    try {
        return body();
    } catch (const pqxx::broken_connection& e) {
        std::cerr << program << ": cannot reach the database: " << e.what() << "\n";
        return base::kExitUnreachable;
    } catch (const pqxx::sql_error& e) {
        // The database is there but does not answer in time: an outage to a script, not a
        // failure of the command.
        if (e.sqlstate() != kStatementTimeoutState) throw;
        std::cerr << program << ": the database did not answer within --statement-timeout ("
                  << statement_timeout_s << " s): " << e.what();
        return base::kExitUnreachable;
    }
}

}  // namespace aclaim::store
