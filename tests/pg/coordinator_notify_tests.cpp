// Notifications wake, never decide. PostgreSQL puts no access control on NOTIFY, so a login with
// no grants at all sprays every channel the coordinator LISTENs on (and the ones its clients do)
// with guessed payloads, the real job ids, generations and worker names among them, while workers
// of two organizations hold jobs: every holder keeps its job and completes it, nothing is
// discarded, and every forgery is counted on /metrics. A genuine cancellation still reaches its
// holder through the check against the row, and how long that takes is measured.

#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <latch>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "common/ops/operator_store.hpp"
#include "coordinator/http/http_server.hpp"
#include "tests/pg/coordinator_client.hpp"
#include "tests/support/metrics_scrape.hpp"
#include "tests/support/rows.hpp"

using namespace aclaim;
using namespace aclaim::testing;
using coordinator::NotificationCounters;

namespace {

constexpr base::Instant kT0 = base::instant_from_micros(1'700'000'000'000'000);

/// What one sprayer sends: per channel, transactions of payloads. PostgreSQL delivers a payload
/// sent twice on one channel in one transaction once, so each transaction's are distinct.
using Spray = std::map<std::string, std::vector<std::vector<std::string>>>;

/// The notifications a spray delivers on `channel`.
std::size_t delivered(const Spray& spray, const std::string& channel) {
    std::size_t n = 0;
    const auto it = spray.find(channel);
    if (it == spray.end()) return 0;
    for (const auto& txn : it->second) n += txn.size();
    return n;
}

void add(Spray& spray, const std::string& channel, std::vector<std::string> payloads,
         bool one_transaction) {
    auto& txns = spray[channel];
    if (one_transaction) {
        std::sort(payloads.begin(), payloads.end());
        payloads.erase(std::unique(payloads.begin(), payloads.end()), payloads.end());
        txns.push_back(std::move(payloads));
    } else {
        for (auto& p : payloads) txns.push_back({std::move(p)});
    }
}

/// Sends a spray as `dsn`'s login; an exception is kept for the test's thread.
void spray_as(const std::string& dsn, const Spray& spray, std::latch& start,
              std::exception_ptr& failed) {
    try {
        pqxx::connection conn(dsn);
        start.arrive_and_wait();
        for (const auto& [channel, txns] : spray) {
            for (const auto& payloads : txns) {
                pqxx::work txn(conn);
                for (const auto& p : payloads) {
                    txn.exec_params("SELECT pg_notify($1, $2)", channel, p);
                }
                txn.commit();
            }
        }
    } catch (...) {
        failed = std::current_exception();
    }
}

struct Held {
    std::unique_ptr<RawWorker> worker;
    std::string name;
    store::OrgId org = 0;
    proto::AssignedJob job;
};

std::string forged_series(NotificationCounters::Channel channel) {
    return "aclaim_forged_notifications_total{channel=\"" +
           std::string(NotificationCounters::kChannels(channel)) + "\"}";
}

/// Every REVOKED in `messages`.
std::vector<proto::Revoked> revokes_in(const std::vector<proto::Message>& messages) {
    std::vector<proto::Revoked> out;
    for (const auto& m : messages) {
        if (const auto* r = std::get_if<proto::Revoked>(&m)) out.push_back(*r);
    }
    return out;
}

}  // namespace

TEST_CASE("notifications forged by a login with no grants tell no worker anything",
          "[coordinator][notify][security]") {
    base::ManualClock clock(kT0);
    CoordinatorHarness h(clock);
    coordinator::HttpOptions http_options = h.coordinator->options().http_endpoint();
    http_options.http_bind = "127.0.0.1:0";
    coordinator::HttpServer http(http_options, h.coordinator->metrics());
    http.start();
    const auto& counters = h.coordinator->metrics().notifications;

    // Org 1: two reviewers and the sentinel, whose job is cancelled for real at the end; org 2:
    // two reviewers. One job each, nothing left pending.
    store::AssignmentStore store(h.db.dsn());
    store.enqueue(1, some_jobs(3), clock.now());
    store.enqueue(2, some_jobs(2), clock.now());
    std::vector<Held> held;
    for (const auto& [name, org] : std::vector<std::pair<std::string, store::OrgId>>{
             {"w1a", 1}, {"w1b", 1}, {"sentinel", 1}, {"w2a", 2}, {"w2b", 2}}) {
        Held x{h.worker(), name, org, {}};
        x.worker->hello(name, org);
        x.job = x.worker->claim_one();
        held.push_back(std::move(x));
    }
    // A parked claim in each organization, which a wake runs again.
    auto p1 = h.greeted("p1", 1);
    const auto p1_claim = p1->claim(1, 60'000);
    auto p2 = h.greeted("p2", 2);
    const auto p2_claim = p2->claim(1, 60'000);
    REQUIRE(eventually([&] { return h.coordinator->metrics().parked.load() >= 2; }, 10s));

    TestLogin login(h.db, "aclaim_nogrants", "spray");
    {
        // It really has no grants: it cannot read a job, only send notifications.
        pqxx::connection conn(login.dsn);
        pqxx::work txn(conn);
        CHECK_THROWS_AS(txn.exec("SELECT count(*) FROM jobs"), pqxx::insufficient_privilege);
    }

    std::vector<std::string> names;
    for (const auto& x : held) names.push_back(x.name);
    names.push_back("p1");
    std::mt19937_64 random(47);
    auto pick = [&](std::int64_t lo, std::int64_t hi) {
        return std::uniform_int_distribution<std::int64_t>(lo, hi)(random);
    };
    // Two sprayers, each with its own connection, released together.
    std::array<Spray, 2> sprays;
    for (std::size_t s = 0; s < sprays.size(); ++s) {
        for (int round = 0; round < 3; ++round) {
            const bool batched = (round + s) % 2 == 0;
            std::vector<std::string> revoke;
            // What a payload alone cannot prove: each held job's real organization, id,
            // generation and holder, the reasons a genuine one never gives, neighbouring
            // generations, the other organization, the other workers.
            for (const auto& x : held) {
                const auto id = std::to_string(x.job.job_id);
                for (const char* reason : {"cancelled", "reclaimed", "lease_expired", "other"}) {
                    for (auto g = x.job.generation - 1; g <= x.job.generation + 2; ++g) {
                        revoke.push_back(std::to_string(x.org) + ":" + id + ":" +
                                         std::to_string(g) + ":" + reason + ":" + x.name);
                    }
                }
                revoke.push_back(std::to_string(3 - x.org) + ":" + id + ":" +
                                 std::to_string(x.job.generation) + ":cancelled:" + x.name);
                for (const auto& other : names) {
                    revoke.push_back(std::to_string(x.org) + ":" + id + ":" +
                                     std::to_string(x.job.generation) + ":cancelled:" + other);
                }
            }
            // Guessed ids: job ids are sequential, generations small.
            for (int i = 0; i < 150; ++i) {
                revoke.push_back(std::to_string(pick(1, 3)) + ":" + std::to_string(pick(1, 40)) +
                                 ":" + std::to_string(pick(1, 3)) +
                                 ":cancelled:" + names[static_cast<std::size_t>(pick(0, 5))]);
            }
            for (const std::string& bad :
                 {std::string(), std::string("garbage"), std::string("1:2:3"),
                  std::string("1:2:3:cancelled:"), std::string("a:b:c:cancelled:w1a"),
                  std::string("1:1:1:cancelled:w1a\nINFO revoke outcome=pushed"),
                  std::string("99999999999999999999:1:1:cancelled:w1a"),
                  "1:1:1:cancelled:" + std::string(7000, 'w')}) {
                revoke.push_back(bad);
            }
            add(sprays[s], "aclaim_revoke", revoke, batched);

            std::vector<std::string> jobs{"1",         "2",         "3",          "1:default",
                                          "2:default", "1:other-q", "2:elsewhere"};
            for (const char* bad : {"", "0", "-1", "x", "1:", "1:bad queue", "1\n2",
                                    "99999999999999999999", ":default"}) {
                jobs.push_back(bad);
            }
            add(sprays[s], "aclaim_jobs", jobs, batched);
            add(sprays[s], "aclaim_schedule",
                {"1700000000000000", "0", "9999999999999999", "", "soon", "1e9", "12 "}, batched);
            // Channels only clients LISTEN on: the coordinator must not care either.
            add(sprays[s], "aclaim_outcomes", {"1", "2", "x"}, batched);
            add(sprays[s], "aclaim_results", {"1", "2", "x"}, batched);
        }
    }
    // The malformed ones per spray round and channel, as the listener's parsers judge them.
    constexpr std::size_t kJobsMalformed = 9;
    constexpr std::size_t kScheduleMalformed = 4;
    std::size_t revoke_total = 0, jobs_malformed = 0, schedule_malformed = 0;
    for (const auto& spray : sprays) {
        revoke_total += delivered(spray, "aclaim_revoke");
        jobs_malformed += kJobsMalformed * 3;
        schedule_malformed += kScheduleMalformed * 3;
    }

    std::latch start(static_cast<std::ptrdiff_t>(sprays.size()));
    std::array<std::exception_ptr, 2> failed{};
    std::vector<std::thread> threads;
    for (std::size_t s = 0; s < sprays.size(); ++s) {
        threads.emplace_back(spray_as, std::cref(login.dsn), std::cref(sprays[s]), std::ref(start),
                             std::ref(failed[s]));
    }
    for (auto& t : threads) t.join();
    for (const auto& f : failed) {
        if (f) std::rethrow_exception(f);
    }

    // Every forgery is heard and checked before the genuine cancellation commits: one that names
    // the sentinel's job, generation and holder, checked after it, would be borne out by the row.
    REQUIRE(eventually(
        [&] {
            return counters.forged[NotificationCounters::Channel::Revoke].load() == revoke_total;
        },
        30s));

    // A genuine cancellation, committed after the spray, still reaches its holder. Notifications
    // are delivered in commit order and the listener counts and posts them in that order, so once
    // it is pushed, every forgery has been heard and acted on.
    Held& sentinel = held[2];
    REQUIRE(sentinel.name == "sentinel");
    auto admin = h.db.connect();
    ops::OperatorStore ops(*admin);
    REQUIRE(ops.cancel({sentinel.job.job_id}, "ops", "withdrawn", clock.now()).size() == 1);
    const auto cancelled = sentinel.worker->expect_push<proto::Revoked>(10s);
    CHECK(cancelled.job_id == sentinel.job.job_id);
    CHECK(cancelled.generation == sentinel.job.generation);
    CHECK(cancelled.reason == "cancelled");
    CHECK(revokes_in(sentinel.worker->others).empty());
    // Every forgery heard, checked against the rows and dropped; only the genuine one borne out.
    CHECK(counters.forged[NotificationCounters::Channel::Revoke].load() == revoke_total);
    CHECK(counters.forged[NotificationCounters::Channel::Jobs].load() == jobs_malformed);
    CHECK(counters.forged[NotificationCounters::Channel::Schedule].load() == schedule_malformed);
    CHECK(counters.revocations_verified.load() == 1);

    // Every other holder keeps its job: its lease renews (and the LEASE answer comes after any
    // push sent to it before), it was told nothing, and its verdict is accepted.
    for (auto& x : held) {
        if (x.name == "sentinel") continue;
        INFO(x.name);
        x.worker->expect<proto::LeaseMsg>(
            x.worker->request(proto::Renew{0, x.job.job_id, x.job.generation}));
        CHECK(revokes_in(x.worker->others).empty());
        const auto accepted = x.worker->expect<proto::Accepted>(
            x.worker->request(proto::Complete{0, x.job.job_id, x.job.generation, "reviewed"}));
        CHECK(accepted.state == "completed");
        CHECK(job_state(*admin, x.job.job_id) == "completed");
        CHECK(job_generation(*admin, x.job.job_id) == x.job.generation);
        CHECK(event_count(*admin, x.job.job_id, "completed") == 1);
        for (const char* kind : {"reclaimed", "discarded", "cancelled", "released"}) {
            CHECK(event_count(*admin, x.job.job_id, kind) == 0);
        }
    }
    {
        pqxx::read_transaction txn(*admin);
        CHECK(
            txn.exec1("SELECT count(*) FROM jobs WHERE state NOT IN ('completed', 'cancelled')")[0]
                .as<int>() == 0);
    }

    // The wakes only made parked claims look again: nothing was handed out, and a real enqueue
    // still wakes org 2's parked claim (org 1's stays parked).
    CHECK(h.coordinator->metrics().jobs_assigned.load() == held.size());
    const auto late = store.enqueue(2, some_jobs(1), clock.now()).at(0);
    const auto got = p2->expect<proto::Assigned>(p2_claim, 10s);
    REQUIRE(got.jobs.size() == 1);
    CHECK(got.jobs[0].job_id == late);
    CHECK_FALSE(p1->answer(p1_claim, 0ms).has_value());

    // /metrics shows the forgeries by channel.
    const auto m = scrape_metrics(http.port());
    CHECK(m.at(forged_series(NotificationCounters::Channel::Revoke)) ==
          static_cast<double>(revoke_total));
    CHECK(m.at(forged_series(NotificationCounters::Channel::Jobs)) ==
          static_cast<double>(jobs_malformed));
    CHECK(m.at(forged_series(NotificationCounters::Channel::Schedule)) ==
          static_cast<double>(schedule_malformed));
    CHECK(m.at("aclaim_revoke_notifications_verified_total") == 1);
    CHECK(m.at("aclaim_revoke_check_duration_seconds_count") >= 1);
}

TEST_CASE_METHOD(ManualCoordinator,
                 "a revocation replayed after its job was retried and claimed again is dropped",
                 "[coordinator][notify][security]") {
    const auto& counters = h.coordinator->metrics().notifications;
    const auto id = store.enqueue(1, some_jobs(1), clock.now()).at(0);
    auto w = h.greeted("w1", 1);
    const auto first = w->claim_one();
    auto admin = h.db.connect();
    ops::OperatorStore ops(*admin);
    REQUIRE(ops.cancel({id}, "ops", "by mistake", clock.now()).size() == 1);
    CHECK(w->expect_push<proto::Revoked>(10s).generation == first.generation);
    REQUIRE(ops.retry({id}, "ops", "undo", clock.now()).size() == 1);
    const auto second = w->claim_one();
    REQUIRE(second.job_id == id);
    REQUIRE(second.generation > first.generation);

    // The genuine payload of the first cancellation, sent again by a login with no grants, and the
    // same for the new generation, which was never cancelled.
    TestLogin login(h.db, "aclaim_nogrants", "replay");
    {
        pqxx::connection conn(login.dsn);
        pqxx::nontransaction txn(conn);
        for (const auto g : {first.generation, second.generation}) {
            txn.exec_params("SELECT pg_notify('aclaim_revoke', $1)",
                            "1:" + std::to_string(id) + ":" + std::to_string(g) + ":cancelled:w1");
        }
    }
    CHECK(eventually(
        [&] { return counters.forged[NotificationCounters::Channel::Revoke].load() == 2; }, 10s));
    w->expect<proto::LeaseMsg>(w->request(proto::Renew{0, id, second.generation}));
    CHECK(revokes_in(w->others).empty());
    CHECK(w->expect<proto::Accepted>(
               w->request(proto::Complete{0, id, second.generation, "reviewed"}))
              .state == "completed");
    CHECK(counters.revocations_verified.load() == 1);
}

TEST_CASE("a genuine cancellation reaches its holder promptly through the check against the row",
          "[coordinator][notify]") {
    base::ManualClock clock(kT0);
    CoordinatorHarness h(clock);
    // A second coordinator on the same database hears every revocation too, holds none of the
    // workers, and must not take a genuine one for a forgery.
    auto other_options = h.coordinator->options();
    coordinator::Coordinator other(other_options, clock);
    other.start();
    const auto& counters = h.coordinator->metrics().notifications;
    const auto& others = other.metrics().notifications;
    store::AssignmentStore store(h.db.dsn());
    auto admin = h.db.connect();
    ops::OperatorStore ops(*admin);
    auto w = h.greeted("w1", 1);
    // Notifications sent before a listener has issued LISTEN are lost to it: both listen first.
    REQUIRE(eventually([&] { return h.coordinator->metrics().listener_starts.load() >= 1; }, 15s));
    REQUIRE(eventually([&] { return other.metrics().listener_starts.load() >= 1; }, 15s));

    constexpr int kRounds = 40;
    std::vector<double> delays_ms;
    for (int i = 0; i < kRounds; ++i) {
        const auto id = store.enqueue(1, some_jobs(1), clock.now()).at(0);
        const auto job = w->claim_one();
        REQUIRE(job.job_id == id);
        const auto started = std::chrono::steady_clock::now();
        if (i % 2 == 0) {
            REQUIRE(ops.cancel({id}, "ops", "withdrawn", clock.now()).size() == 1);
        } else {
            // As a producer cancels: aclaim_cancel_jobs confined to its organization.
            pqxx::work txn(*admin);
            txn.exec_params(
                "SELECT * FROM aclaim_cancel_jobs(1, ARRAY[$1::bigint], 'producer', "
                "'withdrawn', $2::bigint)",
                id, base::to_micros(clock.now()));
            txn.commit();
        }
        const auto revoked = w->expect_push<proto::Revoked>(10s);
        delays_ms.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
                .count());
        CHECK(revoked.job_id == id);
        CHECK(revoked.generation == job.generation);
        CHECK(revoked.reason == "cancelled");
    }
    CHECK(counters.revocations_verified.load() == kRounds);
    CHECK(counters.forged[NotificationCounters::Channel::Revoke].load() == 0);
    REQUIRE(eventually([&] { return others.revocations_verified.load() == kRounds; }, 10s));
    CHECK(others.forged[NotificationCounters::Channel::Revoke].load() == 0);
    other.stop();

    std::sort(delays_ms.begin(), delays_ms.end());
    const auto check = counters.check_latency.snapshot();
    const double median = delays_ms[delays_ms.size() / 2];
    std::printf(
        "cancel to REVOKED over %d cancellations: median %.2f ms, max %.2f ms (the cancelling "
        "statement and its commit included); the check against the row: %llu statements, mean "
        "%.3f ms\n",
        kRounds, median, delays_ms.back(), static_cast<unsigned long long>(check.count),
        check.count == 0
            ? 0.0
            : static_cast<double>(check.sum_us) / 1000.0 / static_cast<double>(check.count));
    // Each one checked against its row, one statement a wait at most.
    CHECK(check.count >= 1);
    CHECK(check.count <= static_cast<std::uint64_t>(kRounds));
    // Promptly: well inside a renewal interval, even on a loaded machine.
    CHECK(median < 1000.0);
}

TEST_CASE_METHOD(ManualCoordinator,
                 "a burst of revocations is checked in a few statements, not one per notification",
                 "[coordinator][notify][security]") {
    const auto& counters = h.coordinator->metrics().notifications;
    store.enqueue(1, some_jobs(1), clock.now());
    auto w = h.greeted("w1", 1);
    const auto job = w->claim_one();

    // 2,000 distinct forgeries committed at once: delivered together, read in a few waits.
    constexpr int kBurst = 2000;
    TestLogin login(h.db, "aclaim_nogrants", "burst");
    {
        pqxx::connection conn(login.dsn);
        pqxx::work txn(conn);
        txn.exec_params(
            "SELECT count(pg_notify('aclaim_revoke', '1:' || $1::bigint || ':' || g || "
            "':cancelled:w1')) FROM generate_series(1, $2::int) AS g",
            job.job_id, kBurst);
        txn.commit();
    }
    REQUIRE(eventually(
        [&] { return counters.forged[NotificationCounters::Channel::Revoke].load() == kBurst; },
        30s));
    const auto statements = counters.check_latency.snapshot().count;
    CHECK(statements >= 2);  // kBatch (1,000) a statement at most
    CHECK(statements <= 40);
    w->expect<proto::LeaseMsg>(w->request(proto::Renew{0, job.job_id, job.generation}));
    CHECK(revokes_in(w->others).empty());
}
