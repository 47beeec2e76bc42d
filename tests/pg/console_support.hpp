#pragma once

// The setups console tests begin with: a fresh database, a connection to it (and a store), and
// the console's crypto ready for operators' passwords.

#include <catch2/catch.hpp>
#include <memory>
#include <pqxx/pqxx>

#include "console/operators.hpp"
#include "tests/support/store_fixture.hpp"
#include "tests/support/test_database.hpp"

namespace aclaim::testing {

/// For TEST_CASE_METHOD: a fresh database and a connection to it, the console's crypto ready.
struct ConsoleDatabase {
    ConsoleDatabase() { console::init_crypto(); }

    TestDatabase db;
    std::unique_ptr<pqxx::connection> conn = db.connect();
};

/// For TEST_CASE_METHOD: StoreAtNow, the console's crypto ready.
struct ConsoleStore : StoreAtNow {
    ConsoleStore() { console::init_crypto(); }
};

}  // namespace aclaim::testing
