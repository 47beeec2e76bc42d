#pragma once

#include <pqxx/pqxx>
#include <stdexcept>
#include <string>
#include <vector>

namespace aclaim::store {

/// A numbered migration (schema/NNNN_name.sql): tables, indexes, data. Never edited once landed.
struct Migration {
    int version;
    std::string name;
    std::string sql;
    std::string checksum;  ///< sha256 of the file, hex
};

/// The baseline (schema/baseline/): the schema of `version` as one set of tables, standing for
/// the numbered migrations up to it that earlier releases applied one by one. A fresh database is
/// built as tables, then every definition, then bindings (the triggers, which name functions), in
/// one transaction. Never edited once landed.
struct Baseline {
    int version;
    std::string tables;
    std::string bindings;
    std::string checksum;  ///< sha256 of tables.sql, hex: what the ledger records for `version`
    std::string bindings_checksum;  ///< sha256 of bindings.sql, hex
};

/// A repeatable definition (schema/definitions/<kind>/<name>.sql): the one current text of a
/// function, view or table's policies, re-applied whenever it changes.
struct Definition {
    std::string name;  ///< "<kind>/<name>", as the ledger records it
    std::string sql;
    std::string checksum;  ///< sha256 of the file, hex
};

/// The baseline compiled into this binary.
const Baseline& embedded_baseline();

/// The numbered migrations after the baseline compiled into this binary, in version order.
const std::vector<Migration>& embedded_migrations();

/// The migrations the baseline replaced, as earlier releases applied them (schema/checksums pins
/// their checksums; their text is not carried): a database that applied them is at the baseline.
const std::vector<Migration>& embedded_history();

/// The schema/definitions files compiled into this binary, in the order they are applied:
/// functions, views, policies, each kind by name.
const std::vector<Definition>& embedded_definitions();

struct MigrationReport {
    std::vector<std::string> applied;      ///< migrations applied by this call, in order
    std::vector<std::string> definitions;  ///< definitions (re)applied by this call, in order
    std::vector<std::string> notes;        ///< what was left alone and why, for the operator
    int version = 0;                       ///< schema version afterwards
};

/// migrate() refused the database and applied nothing; what() says why and what to do.
class MigrationRefused : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

/// The database recorded a migration this binary carries (or one the baseline replaced) with
/// another checksum: the migration's text changed after it was applied there, or the database
/// was migrated from another branch. The schema is not the one this binary describes.
class ChecksumMismatch : public MigrationRefused {
  public:
    using MigrationRefused::MigrationRefused;
};

/// The database stopped part way through the migrations the baseline replaced: this binary does
/// not carry their text, so the release before the baseline must migrate it first.
class SchemaTooOld : public MigrationRefused {
  public:
    using MigrationRefused::MigrationRefused;
};

/// Builds an empty database from the baseline (recorded in schema_migrations as its version);
/// then applies every embedded migration the database lacks, each in its own transaction,
/// recording it and its checksum in schema_migrations; then every definition whose text the
/// database has not applied (all of them after any migration ran, since a migration may replace
/// what they define), each in its own transaction, recorded in schema_definitions. A definition
/// that names a function defined later is applied after it. A session advisory lock makes
/// concurrent starters take turns, so the second one finds the work done. Idempotent.
/// Before applying anything, throws ChecksumMismatch when a recorded checksum differs, and
/// SchemaTooOld when the database has some of the migrations the baseline replaced but not all.
MigrationReport migrate(pqxx::connection& conn);

/// The version of the newest schema this binary carries: its last migration, or the baseline's.
int latest_schema_version();

/// The highest applied version, 0 for an empty database.
int schema_version(pqxx::connection& conn);

/// True when the database has every migration this binary knows.
bool migrations_current(pqxx::connection& conn);

}  // namespace aclaim::store
