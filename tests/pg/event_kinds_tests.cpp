// The audit kinds the C++ names (common/store/event_kinds.hpp) are the ones the schema's CHECK
// constraints allow: a kind declared but not allowed would fail its INSERT at run time, and a kind
// allowed but not declared could be logged with nothing in C++ able to name it.

#include <catch2/catch.hpp>
#include <pqxx/pqxx>
#include <regex>
#include <set>
#include <string>

#include "common/store/event_kinds.hpp"
#include "tests/support/test_database.hpp"

namespace aclaim::testing {

namespace {

/// The quoted literals of the CHECK constraint on `table`.kind of the migrated schema.
std::set<std::string> allowed_kinds(pqxx::connection& conn, const std::string& table) {
    pqxx::read_transaction txn(conn);
    const auto rows = txn.exec_params(R"SQL(
SELECT pg_get_constraintdef(c.oid)
  FROM pg_constraint c
 WHERE c.conrelid = $1::regclass AND c.contype = 'c'
   AND pg_get_constraintdef(c.oid) LIKE '%kind%'
)SQL",
                                      table);
    REQUIRE(rows.size() == 1);
    const std::string def = rows[0][0].as<std::string>();
    std::set<std::string> out;
    const std::regex literal("'([a-z_]+)'::text");
    for (auto it = std::sregex_iterator(def.begin(), def.end(), literal);
         it != std::sregex_iterator(); ++it) {
        out.insert((*it)[1].str());
    }
    return out;
}

template <typename E, std::size_t N>
std::set<std::string> declared(const base::EnumNames<E, N>& names) {
    std::set<std::string> out;
    for (std::size_t i = 0; i < N; ++i) out.emplace(names(static_cast<E>(i)));
    return out;
}

}  // namespace

TEST_CASE("the declared audit kinds are the kinds the schema allows", "[pg][event_kinds]") {
    TestDatabase db;
    auto conn = db.connect();
    CHECK(allowed_kinds(*conn, "job_events") == declared(store::kEventKinds));
    CHECK(allowed_kinds(*conn, "queue_events") == declared(store::kQueueEventKinds));
}

}  // namespace aclaim::testing
