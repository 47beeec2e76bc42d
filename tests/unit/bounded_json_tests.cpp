// JSON from outside the process is parsed with a bound on its nesting (common/base/
// bounded_json.hpp): what reaches the rest of a program is never deep enough to exhaust the
// stack when it is dumped, compared or copied.

#include <catch2/catch.hpp>
#include <string>

#include "common/base/bounded_json.hpp"
#include "common/base/cell_map.hpp"

using aclaim::base::kMaxInputJsonDepth;
using aclaim::base::parse_bounded_json;
using aclaim::base::parse_bounded_json_or_discarded;

namespace {
std::string nested(int depth, char open = '[', char close = ']') {
    return std::string(static_cast<std::size_t>(depth), open) +
           std::string(static_cast<std::size_t>(depth), close);
}
}  // namespace

TEST_CASE("bounded JSON: up to the bound parses, one level more is refused", "[json]") {
    CHECK(parse_bounded_json(nested(kMaxInputJsonDepth)).dump() == nested(kMaxInputJsonDepth));
    CHECK_THROWS_WITH(parse_bounded_json(nested(kMaxInputJsonDepth + 1)),
                      Catch::Contains("nested deeper than 128 levels"));
    // Objects count as arrays do, and scalars do not open a level.
    std::string objects;
    for (int i = 0; i < kMaxInputJsonDepth; ++i) objects += "{\"a\":";
    objects += "1" + std::string(kMaxInputJsonDepth, '}');
    CHECK(parse_bounded_json(objects).is_object());
    CHECK_THROWS_AS(parse_bounded_json("{\"a\":" + objects + "}"), nlohmann::json::parse_error);
    // Ordinary bad JSON is still a parse error.
    CHECK_THROWS_AS(parse_bounded_json("{"), nlohmann::json::parse_error);
}

TEST_CASE("bounded JSON: 100,000 levels are refused without exhausting the stack", "[json]") {
    CHECK_THROWS_WITH(parse_bounded_json(nested(100'000)), Catch::Contains("nested deeper than"));
    CHECK(parse_bounded_json_or_discarded(nested(100'000, '{', '}')).is_discarded());
    CHECK(parse_bounded_json_or_discarded("not json").is_discarded());
    CHECK(parse_bounded_json_or_discarded(R"({"reason": "x"})")["reason"] == "x");
}

TEST_CASE("bounded JSON: a cell map nested too deep is refused with its source", "[json]") {
    CHECK_THROWS_WITH(aclaim::base::CellMap::parse(nested(100'000), "cells.json"),
                      Catch::Contains("cells.json") && Catch::Contains("nested deeper than"));
}
