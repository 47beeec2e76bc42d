#include <catch2/catch.hpp>

#include "common/base/backoff.hpp"
#include "worker/held_jobs.hpp"

using aclaim::base::Backoff;
using aclaim::worker::HeldJobs;
using aclaim::worker::JobRef;
using aclaim::worker::Millis;
using aclaim::worker::TimePoint;

TEST_CASE("renewals fall due one heartbeat apart and never twice in flight", "[worker]") {
    HeldJobs held;
    held.set_heartbeat(Millis(100));
    const TimePoint t0{};
    held.add({7, 3}, Millis(300), t0);
    CHECK(held.next_due() == t0 + Millis(100));
    CHECK(held.take_due(t0 + Millis(99)).empty());
    CHECK(held.take_due(t0 + Millis(100)) == std::vector<JobRef>{{7, 3}});
    // In flight: not offered again even long after, until answered.
    CHECK(held.take_due(t0 + Millis(500)).empty());
    CHECK_FALSE(held.next_due().has_value());
    held.renewed({7, 3}, Millis(300));
    CHECK(held.lease_deadline(7) == t0 + Millis(400));
    CHECK(held.next_due() == t0 + Millis(200));
    CHECK(held.take_due(t0 + Millis(200)) == std::vector<JobRef>{{7, 3}});
}

TEST_CASE("a stopped job is held but not renewed; removal needs the generation", "[worker]") {
    HeldJobs held;
    held.set_heartbeat(Millis(10));
    const TimePoint t0{};
    held.add({1, 1}, Millis(30), t0);
    held.add({2, 5}, Millis(30), t0);
    held.stop_renewing(1);
    CHECK(held.take_due(t0 + Millis(10)) == std::vector<JobRef>{{2, 5}});
    CHECK(held.holds({1, 1}));
    CHECK_FALSE(held.remove({2, 4}));
    CHECK(held.remove({2, 5}));
    CHECK(held.size() == 1);
    CHECK_FALSE(held.next_due().has_value());
}

TEST_CASE("after a reconnect every renewable job is due at once", "[worker]") {
    HeldJobs held;
    held.set_heartbeat(Millis(1000));
    const TimePoint t0{};
    held.add({1, 1}, Millis(3000), t0);
    held.add({2, 1}, Millis(3000), t0);
    CHECK(held.take_due(t0 + Millis(1000)).size() == 2);
    held.renew_all_now(t0 + Millis(1500));
    CHECK(held.take_due(t0 + Millis(1500)).size() == 2);
    held.renewal_abandoned(1);
    CHECK(held.next_due() == t0 + Millis(2500));
}

TEST_CASE("a renewal refused for now is retried early", "[worker]") {
    HeldJobs held;
    held.set_heartbeat(Millis(1000));
    const TimePoint t0{};
    held.add({3, 1}, Millis(3000), t0);
    CHECK(held.take_due(t0 + Millis(1000)).size() == 1);
    held.retry_renewal(3, t0 + Millis(1200));
    CHECK(held.next_due() == t0 + Millis(1200));
    CHECK(held.take_due(t0 + Millis(1200)) == std::vector<JobRef>{{3, 1}});
}

TEST_CASE("backoff doubles up to its cap and starts over on reset", "[worker]") {
    Backoff b(Millis(100), Millis(500));
    CHECK(b.next() == Millis(100));
    CHECK(b.next() == Millis(200));
    CHECK(b.next() == Millis(400));
    CHECK(b.next() == Millis(500));
    CHECK(b.next() == Millis(500));
    CHECK(b.attempts() == 5);
    b.reset();
    CHECK(b.next() == Millis(100));
}

TEST_CASE("renewals taken with a look ahead fall into one heartbeat", "[worker][renew_held]") {
    HeldJobs held;
    held.set_heartbeat(Millis(100));
    const TimePoint t0{};
    held.add({1, 1}, Millis(300), t0);
    held.add({2, 1}, Millis(300), t0 + Millis(30));
    held.add({3, 1}, Millis(300), t0 + Millis(80));
    // Nothing due yet: nothing taken, however far it looks ahead.
    CHECK(held.take_due(t0 + Millis(99), Millis(50)).empty());
    // Job 1 is due; job 2 is due within half a heartbeat and goes with it; job 3 does not.
    CHECK(held.take_due(t0 + Millis(100), Millis(50)) == std::vector<JobRef>{{1, 1}, {2, 1}});
    held.renewed({1, 1}, Millis(300));
    held.renewed({2, 1}, Millis(300));
    // Job 3 falls due first now, and takes 1 and 2 (due 20 ms later) with it: one group.
    CHECK(held.take_due(t0 + Millis(180), Millis(50)) ==
          std::vector<JobRef>{{1, 1}, {2, 1}, {3, 1}});
    for (std::int64_t id : {1, 2, 3}) held.renewed({id, 1}, Millis(300));
    CHECK(held.next_due() == t0 + Millis(280));
    CHECK(held.take_due(t0 + Millis(280), Millis(50)).size() == 3);
}
