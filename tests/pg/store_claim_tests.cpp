// Claims under concurrency, lock strategies and the declared order.

#include <barrier>
#include <catch2/catch.hpp>
#include <future>
#include <mutex>
#include <set>
#include <thread>

#include "common/store/assignment_store.hpp"
#include "tests/support/rows.hpp"
#include "tests/support/store_fixture.hpp"
#include "tests/support/test_database.hpp"

using namespace aclaim;
using store::AssignmentStore;
using store::ClaimOutcome;
using store::StoreOptions;

using testing::kT0;

using namespace std::chrono_literals;

namespace {
constexpr base::Duration kLease = 30 * base::kSeconds;

std::vector<store::NewJob> jobs(int n, int priority = 0) {
    std::vector<store::NewJob> out;
    for (int i = 0; i < n; ++i) out.push_back({priority, "p" + std::to_string(i), 3});
    return out;
}

/// Runs f on another thread and waits at most `limit` for it: a claim that should not block
/// fails the test instead of hanging it.
template <typename F>
auto bounded(F f, std::chrono::seconds limit = std::chrono::seconds(10)) {
    auto fut = std::async(std::launch::async, std::move(f));
    REQUIRE(fut.wait_for(limit) == std::future_status::ready);
    return fut.get();
}
}  // namespace

TEST_CASE("two clients released together never claim the same job", "[store][concurrency]") {
    testing::TestDatabase db;
    AssignmentStore seed(db.dsn());
    AssignmentStore a(db.dsn()), b(db.dsn());
    constexpr int kRounds = 200;
    std::barrier sync(2);
    std::vector<store::JobId> got_a(kRounds), got_b(kRounds);
    auto client = [&](AssignmentStore& s, std::vector<store::JobId>& got, const char* name) {
        for (int r = 0; r < kRounds; ++r) {
            sync.arrive_and_wait();  // both see the round's two new jobs
            auto out = s.claim(1, {name, 1}, kLease, kT0);
            got[r] = out.leases.empty() ? 0 : out.leases[0].job_id;
            sync.arrive_and_wait();  // the round ends before the next is seeded
            if (&s == &a && r + 1 < kRounds) seed.enqueue(1, jobs(2), kT0);
        }
    };
    seed.enqueue(1, jobs(2), kT0);
    std::thread ta(client, std::ref(a), std::ref(got_a), "a");
    std::thread tb(client, std::ref(b), std::ref(got_b), "b");
    ta.join();
    tb.join();
    for (int r = 0; r < kRounds; ++r) {
        INFO("round " << r);
        CHECK(got_a[r] != 0);
        CHECK(got_b[r] != 0);
        CHECK(got_a[r] != got_b[r]);
    }
}

TEST_CASE("sixteen clients drain 2000 jobs, each claimed exactly once", "[store][concurrency]") {
    testing::TestDatabase db;
    AssignmentStore seed(db.dsn());
    for (int i = 0; i < 4; ++i) seed.enqueue(1, jobs(500), kT0);
    constexpr int kClients = 16;
    std::barrier start(kClients);
    std::mutex mu;
    std::multiset<store::JobId> claimed;
    std::vector<std::thread> threads;
    for (int c = 0; c < kClients; ++c) {
        threads.emplace_back([&, c] {
            AssignmentStore s(db.dsn());
            const std::string me = "w" + std::to_string(c);
            start.arrive_and_wait();
            for (int batch = 1;; batch = batch % 4 + 1) {
                auto out = s.claim(1, {me, batch}, kLease, kT0);
                if (out.status == ClaimOutcome::Status::NoWork) break;
                std::lock_guard lock(mu);
                for (const auto& l : out.leases) claimed.insert(l.job_id);
            }
        });
    }
    for (auto& t : threads) t.join();
    // A client may stop on NO_WORK while others still hold the last rows: run one final claim
    // to prove nothing was left pending.
    CHECK(seed.claim(1, {"late", 10}, kLease, kT0).status == ClaimOutcome::Status::NoWork);
    CHECK(claimed.size() == 2000);
    CHECK(std::set<store::JobId>(claimed.begin(), claimed.end()).size() == 2000);
    pqxx::read_transaction t(seed.connection());
    CHECK(t.exec1("SELECT count(*) FROM jobs WHERE state = 'assigned' AND generation = 1")[0]
              .as<int>() == 2000);
    CHECK(t.exec1("SELECT count(*) FROM job_events WHERE kind = 'claimed'")[0].as<int>() == 2000);
}

TEST_CASE("claim order is priority, then enqueue time, then id", "[store][order]") {
    testing::TestDatabase db;
    AssignmentStore s(db.dsn());
    const auto low = s.enqueue(1, jobs(3, 0), kT0);           // same time: id decides
    const auto high = s.enqueue(1, jobs(1, 5), kT0 + 10us);   // higher priority, later
    const auto early = s.enqueue(1, jobs(1, 0), kT0 - 10us);  // earlier than `low`
    std::vector<store::JobId> order;
    for (int i = 0; i < 5; ++i)
        order.push_back(s.claim(1, {"w", 1}, kLease, kT0).leases.at(0).job_id);
    CHECK(order == std::vector<store::JobId>{high[0], early[0], low[0], low[1], low[2]});

    SECTION("a batch claim returns the same order") {
        testing::TestDatabase db2;
        AssignmentStore s2(db2.dsn());
        const auto ids = s2.enqueue(1, jobs(4, 1), kT0);
        auto out = s2.claim(1, {"w", 10}, kLease, kT0);
        REQUIRE(out.leases.size() == 4);
        for (int i = 0; i < 4; ++i) CHECK(out.leases[i].job_id == ids[i]);
    }
}

TEST_CASE("a claim passes over a locked head candidate without waiting", "[store][locks]") {
    testing::TestDatabase db;
    AssignmentStore seed(db.dsn());
    const auto ids = seed.enqueue(1, jobs(2), kT0);
    auto holder_conn = db.connect();
    auto holder = std::make_unique<pqxx::work>(*holder_conn);
    holder->exec_params("SELECT id FROM jobs WHERE id = $1 FOR UPDATE", ids[0]);

    AssignmentStore s(db.dsn());
    auto out = bounded([&] { return s.claim(1, {"w", 1}, kLease, kT0); });
    REQUIRE(out.status == ClaimOutcome::Status::Claimed);
    CHECK(out.leases.at(0).job_id == ids[1]);
    CHECK(testing::job_state(seed.connection(), ids[0]) == "pending");
}
