// Landed migrations never change: schema/checksums pins the sha256 of each, and the migrations
// this binary carries (the baseline, the numbered ones after it) must be exactly those files with
// exactly those checksums; the lines whose file is gone are the migrations the baseline replaced.

#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "common/store/migrations.hpp"

using namespace aclaim;

namespace {

/// schema/checksums as file name -> sha256 (the format `sha256sum` writes and checks).
std::map<std::string, std::string> pinned_checksums() {
    std::ifstream in(std::string(ACLAIM_SOURCE_DIR) + "/schema/checksums");
    REQUIRE(in);
    std::map<std::string, std::string> out;
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream fields(line);
        std::string sum, file;
        fields >> sum >> file;
        out[file] = sum;
    }
    return out;
}

}  // namespace

TEST_CASE("every landed migration keeps the text it landed with", "[schema]") {
    const auto pinned = pinned_checksums();
    for (const auto& m : store::embedded_migrations()) {
        const std::string file = m.name + ".sql";
        const auto it = pinned.find(file);
        if (it == pinned.end()) {
            FAIL_CHECK("schema/" << file
                                 << " is not in schema/checksums: a new migration is pinned when "
                                    "it lands (`sha256sum "
                                 << file << " >> checksums` in schema/)");
            continue;
        }
        INFO("schema/" << file
                       << " changed after it landed (pinned in schema/checksums): a landed "
                          "migration never changes; add a new migration instead, or change the "
                          "function, view or policy in schema/definitions/");
        CHECK(it->second == m.checksum);
    }
    const auto& baseline = store::embedded_baseline();
    INFO("schema/baseline/ changed after it landed: add a migration instead");
    CHECK(pinned.at("baseline/tables.sql") == baseline.checksum);
    CHECK(pinned.at("baseline/bindings.sql") == baseline.bindings_checksum);
    CHECK(pinned.size() ==
          store::embedded_migrations().size() + 2 + store::embedded_history().size());
}

TEST_CASE("the migrations the baseline replaced are its history, up to its version", "[schema]") {
    const auto pinned = pinned_checksums();
    const auto& history = store::embedded_history();
    REQUIRE(!history.empty());
    int previous = 0;
    for (const auto& m : history) {
        CHECK(m.version > previous);
        CHECK(m.version <= store::embedded_baseline().version);
        CHECK(m.sql.empty());
        CHECK(pinned.at(m.name + ".sql") == m.checksum);
        previous = m.version;
    }
    CHECK(history.back().version == store::embedded_baseline().version);
    for (const auto& m : store::embedded_migrations()) {
        CHECK(m.version > store::embedded_baseline().version);
    }
}
