#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "common/base/database_deadlines.hpp"

namespace aclaim::store {

/// Whether a connection string (URI or key=value form) sets `key` itself.
bool names_setting(const std::string& dsn, std::string_view key);

/// The connection string with `key` set to `value`, in whichever form it came, unless it already
/// names that key: what the operator wrote wins.
std::string with_setting(const std::string& dsn, std::string_view key, const std::string& value);

/// The connection string every coordinator connection (and the client library's) uses: libpq's
/// connect_timeout, so that a server that accepts TCP but never answers (frozen, or behind a
/// stalled route) fails the attempt instead of holding it, and TCP keepalives and tcp_user_timeout,
/// so that a connection whose route died is closed by the kernel even while nothing is sent on it.
/// A statement on a server that still acknowledges TCP but does not answer is the
/// StatementWatchdog's business. And target_session_attrs=read-write, so that of the hosts of a
/// multi-host DSN only the writable primary is taken, whichever of them that is after a failover.
std::string guarded_dsn(const std::string& dsn, std::chrono::milliseconds deadline);

/// Why `dsn` is no libpq conninfo or URI at all (libpq's words), or nullopt when it is one: a
/// mistake in what was asked (exit 2), not an unreachable database.
std::optional<std::string> conninfo_refusal(const std::string& dsn);

/// The connection string of an operator's program (aclaimctl, aclaim-console): `deadlines`'
/// connect_timeout (unless PGCONNECT_TIMEOUT is set) and, for Statements::kBounded,
/// statement_timeout (unless PGOPTIONS is set), and TCP keepalives, each unless the connection
/// string names it itself: what the operator wrote wins.
std::string bounded_dsn(const std::string& dsn, const base::DatabaseDeadlines& deadlines,
                        base::Statements statements);

}  // namespace aclaim::store
