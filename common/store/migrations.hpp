#pragma once

#include <pqxx/pqxx>
#include <string>
#include <vector>

namespace aclaim::common {

struct Migration {
    int version;
    std::string name;
    std::string sql;
};

/// The schema/ migrations compiled into this binary, in version order.
const std::vector<Migration>& embedded_migrations();

struct MigrationReport {
    std::vector<std::string> applied;  ///< names applied by this call, in order
    int version = 0;                   ///< schema version afterwards
};

/// Applies every embedded migration the database lacks, each in its own transaction, recording it
/// in schema_migrations. A session advisory lock makes concurrent starters take turns, so the
/// second one finds the work done. Idempotent.
MigrationReport migrate(pqxx::connection& conn);

/// The highest applied version, 0 for an empty database.
int schema_version(pqxx::connection& conn);

/// True when the database has every migration this binary knows.
bool migrations_current(pqxx::connection& conn);

}  // namespace aclaim::common
