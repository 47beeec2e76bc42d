#pragma once

// The statements that set a connection up and keep the schema's ledger: session settings every
// connection of the product runs, and the migrations' own bookkeeping. Prepared nowhere (each runs
// once per connection or per migration), so they are texts with parameters, not named prepares.

#include "common/store/shared_sql.hpp"

namespace aclaim::store::sql {

/// The name the server shows for this session (pg_stat_activity.application_name).
inline const Statement kSetApplicationName{"aclaim_set_application_name",
                                           "SELECT set_config('application_name', $1, false)",
                                           {"application_name text"}};
/// A session's statement timeout, in milliseconds (a client's own bound on every statement).
inline const Statement kSetStatementTimeout{"aclaim_set_statement_timeout",
                                            "SELECT set_config('statement_timeout', $1, false)",
                                            {"milliseconds text"}};
/// The bound on the current transaction's lock waits, in milliseconds (SET LOCAL lock_timeout).
inline const Statement kSetLocalLockTimeout{"aclaim_set_local_lock_timeout",
                                            "SELECT set_config('lock_timeout', $1, true)",
                                            {"milliseconds text"}};
/// The organization a session sees under row-level security, for the whole session.
inline const Statement kSetSessionOrg{
    "aclaim_set_session_org", "SELECT set_config('aclaim.org_id', $1, false)", {"org_id text"}};
/// No JIT compilation on this session: every statement of the product runs in milliseconds.
inline const Statement kJitOff{"aclaim_jit_off", "SET jit = off", {}};
/// Prepared statements run on their generic plan, never planned again for their parameters.
inline const Statement kGenericPlans{
    "aclaim_generic_plans", "SET plan_cache_mode = force_generic_plan", {}};
/// PostgreSQL's own choice between a custom and the generic plan again.
inline const Statement kPlannerChoosesPlans{
    "aclaim_planner_chooses_plans", "RESET plan_cache_mode", {}};
/// A session's own commits need not wait for their flush (the result notifier's NOTIFY only).
inline const Statement kAsyncCommit{"aclaim_async_commit", "SET synchronous_commit = off", {}};
/// Acting as the row-security role (kRowSecurityRole) for the rest of the session.
inline const Statement kActAsRowSecurityRole{
    "aclaim_act_as_row_security_role", std::string("SET ROLE ") + kRowSecurityRole, {}};

/// Bounds the current transaction's lock waits to 5 s: an operator's, the recovery tool's or a
/// migration's statement on a row a coordinator holds gives up instead of hanging behind it.
inline constexpr const char* kShortLockWait = "SET LOCAL lock_timeout = '5s'";

/// A transaction sent as one message of statements (pqxx::pipeline on a nontransaction): its
/// start, its end, its end when what was sent cannot be used, and a prepared statement run by name
/// with its arguments as quoted literals.
inline constexpr const char* kBegin = "BEGIN";
inline constexpr const char* kCommit = "COMMIT";
inline constexpr const char* kRollback = "ROLLBACK";
inline constexpr const char* kExecute = "EXECUTE {NAME}({ARGUMENTS})";

/// The schema's ledger: one row per applied migration, under an advisory lock so that two
/// processes starting at once apply each migration once.
inline const Statement kMigrationsTableExists{
    "aclaim_migrations_table_exists", "SELECT to_regclass('schema_migrations') IS NOT NULL", {}};
inline const Statement kMigrationsCreateTable{"aclaim_migrations_create_table",
                                              "CREATE TABLE IF NOT EXISTS schema_migrations ("
                                              " version integer PRIMARY KEY, name text NOT NULL,"
                                              " applied_at timestamptz NOT NULL DEFAULT now(),"
                                              " checksum text)",
                                              {}};
inline const Statement kMigrationsVersion{
    "aclaim_migrations_version", "SELECT coalesce(max(version), 0) FROM schema_migrations", {}};
inline const Statement kMigrationApplied{"aclaim_migration_applied",
                                         "SELECT 1 FROM schema_migrations WHERE version = $1",
                                         {"version integer"}};
inline const Statement kMigrationRecord{
    "aclaim_migration_record",
    "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
    {"version integer", "name text"}};
inline const Statement kAdvisoryLock{
    "aclaim_advisory_lock", "SELECT pg_advisory_lock($1)", {"key bigint"}};
inline const Statement kAdvisoryUnlock{
    "aclaim_advisory_unlock", "SELECT pg_advisory_unlock($1)", {"key bigint"}};

}  // namespace aclaim::store::sql
