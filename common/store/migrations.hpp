#pragma once

#include <pqxx/pqxx>
#include <stdexcept>
#include <string>
#include <vector>

namespace aclaim::common {

/// A numbered migration (schema/NNNN_name.sql): tables, indexes, data. Never edited once landed.
struct Migration {
    int version;
    std::string name;
    std::string sql;
    std::string checksum;  ///< sha256 of the file, hex
};

/// A repeatable definition (schema/definitions/<kind>/<name>.sql): the one current text of a
/// function, view or table's policies, re-applied whenever it changes.
struct Definition {
    std::string name;  ///< "<kind>/<name>", as the ledger records it
    std::string sql;
    std::string checksum;  ///< sha256 of the file, hex
};

/// The schema/ migrations compiled into this binary, in version order.
const std::vector<Migration>& embedded_migrations();

/// The schema/definitions files compiled into this binary, in the order they are applied:
/// functions, views, policies, each kind by name.
const std::vector<Definition>& embedded_definitions();

struct MigrationReport {
    std::vector<std::string> applied;      ///< migrations applied by this call, in order
    std::vector<std::string> definitions;  ///< definitions (re)applied by this call, in order
    std::vector<std::string> notes;        ///< what was left alone and why, for the operator
    int version = 0;                       ///< schema version afterwards
};

/// The database recorded a migration this binary carries with another checksum: the migration's
/// text changed after it was applied there (or the database was migrated from another branch).
/// Nothing is applied: the schema is not the one this binary's migrations describe.
class ChecksumMismatch : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

/// Applies every embedded migration the database lacks, each in its own transaction, recording it
/// and its checksum in schema_migrations; then every definition whose text the database has not
/// applied (all of them after any migration ran, since a migration may replace what they
/// define), each in its own transaction, recorded in schema_definitions. A session advisory lock
/// makes concurrent starters take turns, so the second one finds the work done. Idempotent.
/// Throws ChecksumMismatch before applying anything when a recorded checksum differs.
MigrationReport migrate(pqxx::connection& conn);

/// The highest applied version, 0 for an empty database.
int schema_version(pqxx::connection& conn);

/// True when the database has every migration this binary knows.
bool migrations_current(pqxx::connection& conn);

}  // namespace aclaim::common
