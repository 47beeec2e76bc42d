// The cell map: what it accepts, and every way a map that would split an organization, or give
// one database to two cells, is refused with a message that names the cell.

#include <catch2/catch.hpp>
#include <string>

#include "common/base/cell_map.hpp"

using aclaim::base::CellMap;
using aclaim::base::CellMapError;

namespace {

const char* const kTwoCells = R"({
  "version": 1,
  "cells": [
    {"name": "eu-1", "dsn": "host=pg-a,pg-b dbname=aclaim target_session_attrs=read-write",
     "coordinators": ["tcp://10.1.0.1:5555", "tcp://10.1.0.2:5555"], "organizations": [1, 2, 17]},
    {"name": "us-1", "dsn": "postgresql://pg-us/aclaim",
     "coordinators": ["tcp://10.2.0.1:5555"], "organizations": [3]}
  ]
})";

std::string refusal(const std::string& text) {
    try {
        CellMap::parse(text, "map.json");
    } catch (const CellMapError& e) {
        return e.what();
    }
    return {};
}

std::string one_cell(const std::string& cell) {
    return R"({"cells": [)" + cell + "]}";
}

}  // namespace

TEST_CASE("cell map: each organization finds its cell and its coordinators", "[cells]") {
    const auto map = CellMap::parse(kTwoCells, "map.json");
    REQUIRE(map.cells().size() == 2);
    CHECK(map.cells()[0].name == "eu-1");
    REQUIRE(map.cell_of(17) != nullptr);
    CHECK(map.cell_of(17)->name == "eu-1");
    CHECK(map.cell_of(17)->coordinators ==
          std::vector<std::string>{"tcp://10.1.0.1:5555", "tcp://10.1.0.2:5555"});
    CHECK(map.cell_of(3)->dsn == "postgresql://pg-us/aclaim");
    CHECK(map.cell_of(4) == nullptr);
    CHECK_THROWS_WITH(map.require_cell_of(4), Catch::Contains("no cell holds organization 4"));
}

TEST_CASE("cell map: an organization in two cells is refused", "[cells]") {
    std::string text = kTwoCells;
    text.replace(text.find("[3]"), 3, "[3, 17]");
    const auto why = refusal(text);
    CHECK_THAT(why, Catch::Contains("organization 17 is mapped to two cells, 'eu-1' and 'us-1'"));
    CHECK_THAT(why, Catch::StartsWith("cell map map.json: "));
    CHECK_THAT(
        refusal(one_cell(
            R"({"name": "a", "dsn": "d", "coordinators": ["tcp://x:1"], "organizations": [5, 5]})")),
        Catch::Contains("organization 5 is mapped twice in cell 'a'"));
}

TEST_CASE("cell map: two cells on one database or one coordinator are refused", "[cells]") {
    const std::string a =
        R"({"name": "a", "dsn": "same", "coordinators": ["tcp://x:1"], "organizations": [1]})";
    const std::string b =
        R"({"name": "b", "dsn": "same", "coordinators": ["tcp://y:1"], "organizations": [2]})";
    CHECK_THAT(refusal(R"({"cells": [)" + a + "," + b + "]}"),
               Catch::Contains("cells 'a' and 'b' have the same dsn"));
    const std::string c =
        R"({"name": "c", "dsn": "other", "coordinators": ["tcp://x:1"], "organizations": [3]})";
    CHECK_THAT(refusal(R"({"cells": [)" + a + "," + c + "]}"),
               Catch::Contains("coordinator tcp://x:1 is listed in cells 'a' and 'c'"));
    CHECK_THAT(refusal(R"({"cells": [)" + a + "," + a + "]}"),
               Catch::Contains("two cells are named 'a'"));
}

TEST_CASE("cell map: malformed maps name what is wrong", "[cells]") {
    CHECK_THAT(refusal("{"), Catch::Contains("not JSON"));
    CHECK_THAT(refusal("[]"), Catch::Contains("JSON object"));
    CHECK_THAT(refusal(R"({"cells": []})"), Catch::Contains("non-empty array"));
    CHECK_THAT(refusal(R"({"cells": [], "cels": 1})"), Catch::Contains("unknown member 'cels'"));
    CHECK_THAT(refusal(R"({"version": 2, "cells": []})"), Catch::Contains("version 2"));
    CHECK_THAT(
        refusal(one_cell(R"({"dsn": "d", "coordinators": ["tcp://x:1"], "organizations": []})")),
        Catch::Contains("cells[0] has no 'name'"));
    CHECK_THAT(
        refusal(one_cell(
            R"({"name": "a b", "dsn": "d", "coordinators": ["tcp://x:1"], "organizations": []})")),
        Catch::Contains("cells[0].name must be"));
    CHECK_THAT(
        refusal(one_cell(
            R"({"name": "a", "dsn": "", "coordinators": ["tcp://x:1"], "organizations": []})")),
        Catch::Contains("cell 'a': 'dsn' must be a non-empty string"));
    CHECK_THAT(
        refusal(one_cell(R"({"name": "a", "dsn": "d", "coordinators": [], "organizations": []})")),
        Catch::Contains("'coordinators' must be a non-empty array"));
    CHECK_THAT(refusal(one_cell(
                   R"({"name": "a", "dsn": "d", "coordinators": ["x:1"], "organizations": []})")),
               Catch::Contains("every coordinator must be an endpoint"));
    CHECK_THAT(
        refusal(one_cell(
            R"({"name": "a", "dsn": "d", "coordinators": ["tcp://x:1"], "organizations": [0]})")),
        Catch::Contains("every organization must be an integer >= 1, got 0"));
    CHECK_THAT(
        refusal(one_cell(
            R"({"name": "a", "dsn": "d", "coordinators": ["tcp://x:1"], "organizations": ["1"]})")),
        Catch::Contains("got \"1\""));
    CHECK_THAT(
        refusal(one_cell(
            R"({"name": "a", "dsn": "d", "coordinators": ["tcp://x:1"], "organizations": [], "dns": 1})")),
        Catch::Contains("cells[0] has an unknown member 'dns'"));
    CHECK_THROWS_WITH(CellMap::load("/nonexistent/cells.json"), Catch::Contains("cannot be read"));
}
