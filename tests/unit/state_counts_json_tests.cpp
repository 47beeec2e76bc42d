#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "common/ops/job_json.hpp"

using namespace aclaim;

namespace {

/// The members `aclaimctl status --json` and `aclaimctl queue list --json` print per state, with
/// the field each one reads: the contract scripts read, spelled out here on purpose.
template <typename Status>
std::vector<std::pair<std::string, std::int64_t Status::*>> state_members() {
    return {{"pending", &Status::pending},     {"scheduled", &Status::scheduled},
            {"assigned", &Status::assigned},   {"completed", &Status::completed},
            {"failed", &Status::failed},       {"discarded", &Status::discarded},
            {"cancelled", &Status::cancelled}, {"quarantined", &Status::quarantined},
            {"parked", &Status::parked},       {"waiting", &Status::waiting}};
}

/// Gives every state a count of its own (1, 2, ...), so that a count under the wrong name shows.
template <typename Status>
Status distinct_counts() {
    Status s;
    std::int64_t n = 0;
    for (const auto& [name, field] : state_members<Status>()) s.*field = ++n;
    return s;
}

template <typename Status>
void check_state_counts() {
    const auto s = distinct_counts<Status>();
    const nlohmann::json json = ops::state_counts_json(s);
    REQUIRE(json.is_object());
    CHECK(json.size() == state_members<Status>().size());
    for (const auto& [name, field] : state_members<Status>()) {
        INFO(name);
        REQUIRE(json.contains(name));
        CHECK(json.at(name) == nlohmann::json(s.*field));
    }
}

}  // namespace

TEST_CASE("state_counts_json names every state's count of an organization", "[ops][json]") {
    check_state_counts<ops::OrgStatus>();
}

TEST_CASE("state_counts_json names every state's count of a queue", "[ops][json]") {
    check_state_counts<ops::QueueStatus>();
}
