#include <catch2/catch.hpp>

#include <regex>
#include <set>
#include <string>

#include "common/store/store_sql.hpp"

namespace sql = aclaim::common::sql;

TEST_CASE("Statements: each declares exactly the parameters its text uses", "[store]") {
    std::set<std::string> names;
    for (const sql::Statement* s : sql::kStatements) {
        INFO(s->name);
        CHECK(names.insert(s->name).second);
        std::set<int> used;
        const std::regex param(R"(\$(\d+))");
        for (auto it = std::sregex_iterator(s->text.begin(), s->text.end(), param);
             it != std::sregex_iterator(); ++it) {
            used.insert(std::stoi((*it)[1].str()));
        }
        REQUIRE_FALSE(used.empty());
        CHECK(*used.begin() == 1);
        CHECK(static_cast<std::size_t>(*used.rbegin()) == s->params.size());
        CHECK(used.size() == s->params.size());
    }
}
