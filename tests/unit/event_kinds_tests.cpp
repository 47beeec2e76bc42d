// The SQL of the statement headers names audit kinds in literal text (WHERE kind = 'claimed'):
// each such literal must be a declared kind (common/store/event_kinds.hpp), so that a misspelt
// kind, which PostgreSQL would accept and match nothing with, fails here.

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "common/store/event_kinds.hpp"

namespace aclaim::testing {

namespace {

/// The literals compared with a kind column in `text`: kind = 'x', kind <> 'x', kind IN ('x', 'y').
std::vector<std::string> kind_literals(const std::string& text) {
    std::vector<std::string> out;
    const std::regex compared(R"(kind\s*(?:=|<>|!=)\s*'(\w+)')");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), compared);
         it != std::sregex_iterator(); ++it) {
        out.push_back((*it)[1].str());
    }
    const std::regex listed(R"(kind\s+IN\s*\(([^)]*)\))", std::regex::icase);
    const std::regex literal(R"('(\w+)')");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), listed);
         it != std::sregex_iterator(); ++it) {
        const std::string list = (*it)[1].str();
        for (auto l = std::sregex_iterator(list.begin(), list.end(), literal);
             l != std::sregex_iterator(); ++l) {
            out.push_back((*l)[1].str());
        }
    }
    return out;
}

bool declared(const std::string& kind) {
    return store::kEventKinds.parse(kind) || store::kQueueEventKinds.parse(kind);
}

}  // namespace

TEST_CASE("the kind literals are found in SQL text", "[event_kinds]") {
    const auto found = kind_literals(
        "WHERE e.kind = 'claimd' AND kind <> 'rejected' OR e.kind IN ('claimed', 'renewd')");
    CHECK(found == std::vector<std::string>{"claimd", "rejected", "claimed", "renewd"});
    CHECK_FALSE(declared("claimd"));
    CHECK(declared("claimed"));
}

TEST_CASE("every audit kind the statement headers compare with is declared", "[event_kinds]") {
    namespace fs = std::filesystem;
    std::size_t headers = 0;
    std::size_t literals = 0;
    for (const char* dir : {"common", "coordinator", "console", "ctl", "clients", "drills"}) {
        const fs::path root = fs::path(ACLAIM_SOURCE_DIR) / dir;
        for (const auto& entry : fs::recursive_directory_iterator(root)) {
            const std::string name = entry.path().filename().string();
            if (!entry.is_regular_file() || !name.ends_with("_sql.hpp")) continue;
            ++headers;
            std::ifstream in(entry.path());
            std::stringstream text;
            text << in.rdbuf();
            for (const auto& kind : kind_literals(text.str())) {
                ++literals;
                INFO(entry.path().string() << ": kind '" << kind << "'");
                CHECK(declared(kind));
            }
        }
    }
    CHECK(headers > 5);
    CHECK(literals > 5);
}

}  // namespace aclaim::testing
