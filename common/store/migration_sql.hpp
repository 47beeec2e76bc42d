#pragma once

// The migrator's ledger beyond schema_migrations' first shape (session_sql.hpp creates that):
// the checksum of each migration as applied (the baseline's among them), and the repeatable
// definitions with the checksum of the text last applied. Run once per migrate, so texts with
// parameters.

#include "common/store/statement.hpp"

namespace aclaim::store::sql {

inline const Statement kMigrationsRecorded{
    "aclaim_migrations_recorded", "SELECT version, checksum FROM schema_migrations", {}};
inline const Statement kMigrationRecordChecksum{
    "aclaim_migration_record_checksum",
    "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
    {"version integer", "name text", "checksum text"}};

inline const Statement kDefinitionsCreateTable{
    "aclaim_definitions_create_table",
    "CREATE TABLE IF NOT EXISTS schema_definitions (name text PRIMARY KEY,"
    " checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())",
    {}};
inline const Statement kDefinitionChecksum{
    "aclaim_definition_checksum",
    "SELECT checksum FROM schema_definitions WHERE name = $1",
    {"name text"}};
inline const Statement kDefinitionRecord{
    "aclaim_definition_record",
    "INSERT INTO schema_definitions (name, checksum) VALUES ($1, $2) ON CONFLICT (name)"
    " DO UPDATE SET checksum = excluded.checksum, applied_at = now()",
    {"name text", "checksum text"}};
/// What a definition runs under: objects it creates unqualified land in the schema, and
/// `SET search_path FROM CURRENT` in a definition pins exactly the schema, then pg_temp (the
/// hardening every SECURITY DEFINER function carries). Bodies are checked when called, not when
/// created, so a function may name one defined later in the order.
inline const Statement kDefinitionSearchPath{
    "aclaim_definition_search_path",
    "SELECT set_config('search_path', quote_ident(current_schema()) || ', pg_temp', true)",
    {}};
inline const Statement kDefinitionBodiesUnchecked{
    "aclaim_definition_bodies_unchecked", "SET LOCAL check_function_bodies = off", {}};
/// A migration or definition waits this long for a table's lock before it rolls back and retries.
inline const Statement kMigrationLockTimeout{
    "aclaim_migration_lock_timeout", "SET LOCAL lock_timeout = '5s'", {}};

}  // namespace aclaim::store::sql
