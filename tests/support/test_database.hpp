#pragma once

#include <memory>
#include <pqxx/pqxx>
#include <string>
#include <vector>

namespace aclaim::testing {

/// The DSN of a maintenance database on the test server: ACLAIM_TEST_DSN when set, otherwise a
/// throwaway PostgreSQL 15 started once per test process (compose/pgtmp) and stopped at exit.
const std::string& server_dsn();

/// Replaces the database name in a DSN (URI or keyword form).
std::string with_database(const std::string& dsn, const std::string& db);

/// The same DSN logging in as `user` (URI or keyword form); the throwaway server trusts 127.0.0.1.
std::string with_user(const std::string& dsn, const std::string& user);

/// A fresh, fully migrated database for one test, cloned from a template and dropped afterwards.
class TestDatabase {
  public:
    TestDatabase();
    ~TestDatabase();
    TestDatabase(const TestDatabase&) = delete;
    TestDatabase& operator=(const TestDatabase&) = delete;

    const std::string& dsn() const { return dsn_; }
    const std::string& name() const { return name_; }
    /// A new connection to this database.
    std::unique_ptr<pqxx::connection> connect() const;

  private:
    std::string name_;
    std::string dsn_;
};

/// A login role of one test's own, with no privilege but PUBLIC's and those of the roles in
/// `member_of`; dropped afterwards, once its connections are ended. Roles are cluster-wide, so
/// the name carries the process id: `prefix`_<pid>_`suffix`.
class TestLogin {
  public:
    TestLogin(const TestDatabase& db, const std::string& prefix, const std::string& suffix,
              const std::vector<std::string>& member_of = {});
    ~TestLogin();
    TestLogin(const TestLogin&) = delete;
    TestLogin& operator=(const TestLogin&) = delete;

    const std::string name;
    /// The database's DSN logging in as this role.
    const std::string dsn;

  private:
    const TestDatabase& db_;
};

/// A database of its own whose ledger records the migrations the baseline replaced that come
/// before `version`, in the ledger's shape of the releases that applied them (no checksums), and
/// that holds nothing else: what this release sees of a database that stopped part way through
/// them. Dropped afterwards.
class OlderSchemaDatabase {
  public:
    OlderSchemaDatabase(const std::string& tag, int version);
    ~OlderSchemaDatabase();
    OlderSchemaDatabase(const OlderSchemaDatabase&) = delete;
    OlderSchemaDatabase& operator=(const OlderSchemaDatabase&) = delete;

    const std::string& dsn() const { return dsn_; }

  private:
    std::string name_;
    std::string dsn_;
};

}  // namespace aclaim::testing
