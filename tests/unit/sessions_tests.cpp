// The session table on a manual clock: sessions by connection and by worker, re-identification,
// and forgetting the silent ones that have nothing outstanding.

#include <catch2/catch.hpp>

#include "common/base/clock.hpp"
#include "coordinator/router/sessions.hpp"

using namespace aclaim;
using namespace aclaim::coordinator;
using namespace std::chrono_literals;

namespace {
constexpr auto kBinary = proto::Encoding::Binary;
constexpr auto kJson = proto::Encoding::Json;
}  // namespace

TEST_CASE("a session is found by its connection and by its worker", "[sessions]") {
    base::ManualClock clock(base::instant_from_micros(0));
    SessionTable table(clock);
    Session& s = table.open("conn-a", "w1", 7, kJson);
    CHECK(s.routing_id == "conn-a");
    CHECK(s.org_id == 7);
    CHECK(s.encoding == kJson);
    CHECK(s.last_seen == clock.monotonic_now());
    CHECK(table.size() == 1);
    CHECK(table.find("conn-a") == &s);
    CHECK(table.find("conn-b") == nullptr);
    CHECK(table.find_worker(7, "w1") == &s);
    CHECK(table.find_worker(8, "w1") == nullptr);
    table.close("conn-a");
    CHECK(table.size() == 0);
    CHECK(table.find_worker(7, "w1") == nullptr);
}

TEST_CASE("a worker's newest connection is the one told of reclaims", "[sessions]") {
    base::ManualClock clock(base::instant_from_micros(0));
    SessionTable table(clock);
    table.open("old", "w1", 1, kBinary);
    table.open("new", "w1", 1, kBinary);
    CHECK(table.size() == 2);
    REQUIRE(table.find_worker(1, "w1") != nullptr);
    CHECK(table.find_worker(1, "w1")->routing_id == "new");
    // Closing the abandoned connection does not forget the worker's current one.
    table.close("old");
    REQUIRE(table.find_worker(1, "w1") != nullptr);
    CHECK(table.find_worker(1, "w1")->routing_id == "new");
}

TEST_CASE("HELLO again re-identifies a connection and keeps what it has outstanding",
          "[sessions]") {
    base::ManualClock clock(base::instant_from_micros(0));
    SessionTable table(clock);
    table.open("conn", "w1", 1, kBinary).outstanding = 3;
    clock.advance(5 * base::kSeconds);
    Session& s = table.open("conn", "w2", 1, kJson);
    CHECK(table.size() == 1);
    CHECK(s.outstanding == 3);
    CHECK(s.worker_id == "w2");
    CHECK(s.last_seen == clock.monotonic_now());
    CHECK(table.find_worker(1, "w1") == nullptr);
    CHECK(table.find_worker(1, "w2") == &s);
}

TEST_CASE("only sessions silent past the limit with nothing outstanding are forgotten",
          "[sessions]") {
    base::ManualClock clock(base::instant_from_micros(0));
    SessionTable table(clock);
    table.open("quiet", "w1", 1, kBinary);
    table.open("busy", "w2", 1, kBinary).outstanding = 1;
    table.open("talking", "w3", 1, kBinary);

    clock.advance(90 * base::kSeconds);
    table.touch(*table.find("talking"));
    clock.advance(30 * base::kSeconds);
    // Exactly at the limit is not past it.
    CHECK(table.expire_idle(120s) == 0);

    clock.advance(1 * base::kMillis);
    CHECK(table.expire_idle(120s) == 1);
    CHECK(table.find("quiet") == nullptr);
    CHECK(table.find_worker(1, "w1") == nullptr);
    CHECK(table.find("busy") != nullptr);
    CHECK(table.find("talking") != nullptr);

    table.find("busy")->outstanding = 0;
    CHECK(table.expire_idle(120s) == 1);
    CHECK(table.find("busy") == nullptr);
    clock.advance(90 * base::kSeconds);
    CHECK(table.expire_idle(120s) == 1);
    CHECK(table.size() == 0);
}

TEST_CASE("a sweep with a budget covers the table in slices, going on where it stopped",
          "[sessions]") {
    base::ManualClock clock(base::instant_from_micros(0));
    SessionTable table(clock);
    for (int i = 0; i < 5; ++i) {
        table.open("r" + std::to_string(i), "w" + std::to_string(i), 1, kBinary);
    }
    table.find("r2")->outstanding = 1;
    clock.advance(121 * base::kSeconds);
    table.touch(*table.find("r4"));
    // Five sessions, two at a time: two slices look at four, the third at the last one.
    std::size_t closed = 0;
    for (int slice = 0; slice < 3; ++slice) {
        const auto n = table.expire_idle(120s, 2);
        CHECK(n <= 2);
        closed += n;
        CHECK(table.size() + closed == 5);
    }
    CHECK(closed == 3);
    CHECK(table.size() == 2);
    CHECK(table.find("r2") != nullptr);
    CHECK(table.find("r4") != nullptr);
    // A slice never looks past its budget: nothing is left to close, and none is closed twice.
    CHECK(table.expire_idle(120s, 2) == 0);
}

TEST_CASE("the membership moves only when a worker gains or loses its session", "[sessions]") {
    base::ManualClock clock(base::instant_from_micros(0));
    SessionTable table(clock);
    const auto m0 = table.membership();
    table.open("a", "w1", 1, kBinary);
    const auto m1 = table.membership();
    CHECK(m1 != m0);
    // The same worker on another connection: still one worker, named once.
    table.open("b", "w1", 1, kBinary);
    CHECK(table.membership() == m1);
    // Its older connection going away does not take the worker with it.
    table.close("a");
    CHECK(table.membership() == m1);
    REQUIRE(table.workers_by_org().at(1).size() == 1);
    CHECK(table.workers_by_org().at(1)[0].name == "w1");
    table.close("b");
    CHECK(table.membership() != m1);
    CHECK(table.workers_by_org().empty());
    // Nor does its newest connection going away while an older one stays.
    table.open("c", "w1", 1, kBinary);
    table.open("d", "w1", 1, kBinary);
    const auto m2 = table.membership();
    table.close("d");
    CHECK(table.membership() == m2);
    REQUIRE(table.workers_by_org().count(1) == 1);
    CHECK(table.workers_by_org().at(1)[0].name == "w1");
}

TEST_CASE("a worker serves the union of its sessions' queues; the membership moves with it",
          "[sessions]") {
    base::ManualClock clock(base::instant_from_micros(0));
    SessionTable table(clock);
    const auto queues_of_w1 = [&] {
        const auto workers = table.workers_by_org();
        REQUIRE(workers.at(1).size() == 1);
        CHECK(workers.at(1)[0].name == "w1");
        return workers.at(1)[0].queues;
    };
    table.serve(table.open("a", "w1", 1, kBinary), {"intake"});
    CHECK(queues_of_w1() == std::vector<std::string>{"intake"});
    auto m = table.membership();
    // A second connection serving what the worker serves already changes nothing to publish.
    table.serve(table.open("b", "w1", 1, kBinary), {"intake"});
    CHECK(table.membership() == m);
    // A HELLO that changes a session's queues does.
    table.serve(*table.find("b"), {"inspect", "intake"});
    CHECK(table.membership() != m);
    CHECK(queues_of_w1() == std::vector<std::string>{"inspect", "intake"});
    // The same HELLO again keeps what the worker serves.
    table.serve(table.open("b", "w1", 1, kBinary), {"inspect", "intake"});
    CHECK(queues_of_w1() == std::vector<std::string>{"inspect", "intake"});
    m = table.membership();
    // "intake" is still served by "b" when "a" goes; "inspect" leaves with "b".
    table.close("a");
    CHECK(table.membership() == m);
    CHECK(queues_of_w1() == std::vector<std::string>{"inspect", "intake"});
    table.serve(*table.find("b"), {"intake"});
    CHECK(table.membership() != m);
    CHECK(queues_of_w1() == std::vector<std::string>{"intake"});
    // A connection that says HELLO as another worker takes none of the first one's queues along.
    table.serve(table.open("b", "w2", 1, kBinary), {"review"});
    const auto workers = table.workers_by_org();
    REQUIRE(workers.at(1).size() == 1);
    CHECK(workers.at(1)[0].name == "w2");
    CHECK(workers.at(1)[0].queues == std::vector<std::string>{"review"});
    table.close("b");
    CHECK(table.workers_by_org().empty());
}

TEST_CASE("sessions opened under revoked keys are named", "[sessions]") {
    base::ManualClock clock(base::instant_from_micros(0));
    SessionTable table(clock);
    table.open("a", "w1", 1, kBinary).public_key = "key-1";
    table.open("b", "w2", 1, kBinary).public_key = "key-2";
    table.open("c", "w3", 1, kBinary);
    CHECK(table.opened_with({}).empty());
    CHECK(table.opened_with({"key-2", "key-9"}) == std::vector<std::string>{"b"});
}

TEST_CASE("sessions are counted per key and per organization for their limits",
          "[sessions][limits]") {
    base::ManualClock clock(base::instant_from_micros(0));
    SessionTable table(clock);
    table.open("a1", "w", 1, kBinary);
    table.open("a2", "w", 1, kBinary);
    table.open("b1", "v", 1, kBinary);
    CHECK(table.of_key(1, "w") == 2);
    CHECK(table.of_key(1, "v") == 1);
    CHECK(table.of_org(1) == 3);
    // A third session of the key is over a limit of two; another key of the organization is not.
    CHECK(table.over_limit("a3", 1, "w", 2, 100) == SessionLimit::PerKey);
    CHECK_FALSE(table.over_limit("b2", 1, "v", 2, 100));
    // A HELLO again on one of the key's own sessions takes no new place.
    CHECK_FALSE(table.over_limit("a1", 1, "w", 2, 100));
    // The organization's limit, and another organization beside it.
    CHECK(table.over_limit("c1", 1, "u", 2, 3) == SessionLimit::PerOrg);
    CHECK_FALSE(table.over_limit("d1", 2, "u", 2, 3));
    // Every way out gives the place back: BYE, re-identification, the idle sweep.
    table.close("a1");
    CHECK(table.of_key(1, "w") == 1);
    table.open("a2", "v", 1, kBinary);
    CHECK(table.of_key(1, "w") == 0);
    CHECK(table.of_key(1, "v") == 2);
    CHECK(table.of_org(1) == 2);
    clock.advance(10s);
    CHECK(table.expire_idle(5s) == 2);
    CHECK(table.of_org(1) == 0);
    CHECK_FALSE(table.over_limit("c1", 1, "u", 1, 1));
}

TEST_CASE("a closed connection's descriptor closes its sessions, and only theirs",
          "[sessions][limits]") {
    base::ManualClock clock(base::instant_from_micros(0));
    SessionTable table(clock);
    std::vector<std::pair<std::string, bool>> told;
    table.set_key_listener(
        [&](store::OrgId, const std::string& name, bool any) { told.emplace_back(name, any); });
    table.set_fd(table.open("a", "w", 1, kBinary), 11);
    table.set_fd(table.open("b", "w", 1, kBinary), 12);
    table.set_fd(table.open("c", "v", 1, kBinary), 13);
    CHECK(told == std::vector<std::pair<std::string, bool>>{{"w", true}, {"v", true}});
    CHECK(table.close_fd(11) == std::vector<std::string>{"a"});
    CHECK(table.find("a") == nullptr);
    CHECK(table.find("b") != nullptr);
    CHECK(table.of_key(1, "w") == 1);
    CHECK(table.close_fd(11).empty());
    CHECK(table.close_fd(12) == std::vector<std::string>{"b"});
    CHECK(told.back() == std::pair<std::string, bool>{"w", false});
    // A session closed another way is no longer found by its descriptor.
    table.close("c");
    CHECK(table.close_fd(13).empty());
    CHECK(table.size() == 0);
}
