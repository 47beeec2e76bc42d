#include <catch2/catch.hpp>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "common/ops/operator_sql.hpp"
#include "common/ops/recovery_sql.hpp"
#include "common/store/store_sql.hpp"

namespace sql = aclaim::common::sql;

TEST_CASE("Statements: each declares exactly the parameters its text uses", "[store]") {
    std::vector<const sql::Statement*> all = sql::kStatements;
    all.insert(all.end(), sql::kOperatorStatements.begin(), sql::kOperatorStatements.end());
    all.insert(all.end(), sql::kRecoveryStatements.begin(), sql::kRecoveryStatements.end());
    all.push_back(&sql::kNotifyResults);
    std::set<std::string> names;
    for (const sql::Statement* s : all) {
        INFO(s->name);
        CHECK(names.insert(s->name).second);
        std::set<int> used;
        const std::regex param(R"(\$(\d+))");
        for (auto it = std::sregex_iterator(s->text.begin(), s->text.end(), param);
             it != std::sregex_iterator(); ++it) {
            used.insert(std::stoi((*it)[1].str()));
        }
        if (s->params.empty()) {
            CHECK(used.empty());
            continue;
        }
        REQUIRE_FALSE(used.empty());
        CHECK(*used.begin() == 1);
        CHECK(static_cast<std::size_t>(*used.rbegin()) == s->params.size());
        CHECK(used.size() == s->params.size());
    }
}
