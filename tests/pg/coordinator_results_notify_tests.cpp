// Result consumers are told of completions after they commit, by the coordinator's result
// notifier, not by the completion's own transaction: a listener woken by a notification reads
// every result that was accepted before it, and no result depends on a notification of its own.

#include <catch2/catch.hpp>
#include <pqxx/pqxx>
#include <set>
#include <string>
#include <vector>

#include "coordinator/db/result_notifier.hpp"
#include "coordinator/db/statement_watchdog.hpp"
#include "tests/pg/coordinator_client.hpp"
#include "tests/support/rows.hpp"

using namespace aclaim;
using namespace aclaim::testing;

namespace {

constexpr base::Instant kT0 = base::instant_from_micros(1'700'000'000'000'000);

/// LISTENs on the results channel and keeps every payload.
class ResultsListener final : public pqxx::notification_receiver {
  public:
    explicit ResultsListener(pqxx::connection& conn)
        : pqxx::notification_receiver(conn, coordinator::ResultNotifier::kChannel) {}
    void operator()(const std::string& payload, int) override { payloads.push_back(payload); }
    std::vector<std::string> payloads;
};

/// Waits up to 10 s for at least one notification more than `seen`.
bool await_more(pqxx::connection& conn, const ResultsListener& l, std::size_t seen) {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (l.payloads.size() <= seen && std::chrono::steady_clock::now() < deadline) {
        conn.await_notification(0, 100'000);
    }
    return l.payloads.size() > seen;
}

long results_of(pqxx::connection& conn, const std::vector<store::JobId>& jobs) {
    pqxx::work txn(conn);
    std::string list;
    for (const auto j : jobs) list += (list.empty() ? "" : ",") + std::to_string(j);
    return txn.exec1("SELECT count(*) FROM job_results WHERE job_id IN (" + list + ")")[0]
        .as<long>();
}

}  // namespace

TEST_CASE_METHOD(
    ManualCoordinator,
    "completions notify their organization after the commit, and a woken reader sees them",
    "[coordinator][results]") {
    store.enqueue(1, some_jobs(6), clock.now());
    store.enqueue(2, some_jobs(1), clock.now());
    auto listen_conn = h.db.connect();
    ResultsListener listener(*listen_conn);
    auto read_conn = h.db.connect();

    SECTION("one completion: one notification naming its organization") {
        auto w = h.greeted("w1", 1);
        const auto job = w->claim_one();
        const auto req = w->next_req();
        w->send(proto::Complete{req, job.job_id, job.generation, "review:w1"});
        CHECK(w->expect<proto::Accepted>(req).state == "completed");
        REQUIRE(await_more(*listen_conn, listener, 0));
        CHECK(listener.payloads.front() == "1");
        CHECK(results_of(*read_conn, {job.job_id}) == 1);
    }

    SECTION("completions sent together: the last notification finds every accepted result") {
        auto w = h.greeted("w1", 1);
        const auto claim = w->claim(5);
        const auto assigned = w->expect<proto::Assigned>(claim);
        REQUIRE(assigned.jobs.size() == 5);
        std::vector<std::uint64_t> reqs;
        std::vector<store::JobId> jobs;
        // All five before any answer, so that the DB threads may coalesce them.
        for (const auto& j : assigned.jobs) {
            reqs.push_back(w->next_req());
            jobs.push_back(j.job_id);
            w->send(proto::Complete{reqs.back(), j.job_id, j.generation, "review"});
        }
        // Two DB threads may answer two batches in either order.
        std::set<std::uint64_t> accepted;
        const auto deadline = std::chrono::steady_clock::now() + 10s;
        while (accepted.size() < reqs.size() && std::chrono::steady_clock::now() < deadline) {
            auto m = w->receive(100ms);
            if (m && std::holds_alternative<proto::Accepted>(*m)) {
                accepted.insert(proto::request_id(*m));
            }
        }
        CHECK(accepted == std::set<std::uint64_t>(reqs.begin(), reqs.end()));
        // Every notification is sent after the commits it announces; the accepted results all
        // committed before the last answer, so the notifications still to come (at least one)
        // find all five, and no organization is named but the one that completed.
        REQUIRE(await_more(*listen_conn, listener, 0));
        while (await_more(*listen_conn, listener, listener.payloads.size())) {
        }
        CHECK(results_of(*read_conn, jobs) == 5);
        CHECK(std::set<std::string>(listener.payloads.begin(), listener.payloads.end()) ==
              std::set<std::string>{"1"});
        CHECK(listener.payloads.size() <= 5);
    }

    SECTION("a refused completion notifies nobody") {
        auto w = h.greeted("w2", 2);
        const auto job = w->claim_one();
        const auto req = w->next_req();
        w->send(proto::Complete{req, job.job_id, job.generation + 1, "review:stale"});
        CHECK(w->expect<proto::Rejected>(req).reason == "stale_generation");
        // A fence: an accepted completion of the other organization, queued on the notifier's one
        // thread after anything the refusal could have queued. Once its notification is here, a
        // stray one for organization 2 has been sent too, either before it or in the same round,
        // and cannot merge into the accepted completion's below.
        auto fence = h.greeted("w1", 1);
        const auto other = fence->claim_one();
        CHECK(fence->complete(other, "review:w1").state == "completed");
        REQUIRE(await_more(*listen_conn, listener, 0));
        pqxx::nontransaction(*listen_conn).exec("SELECT 1");
        listen_conn->get_notifs();
        CHECK(listener.payloads == std::vector<std::string>{"1"});

        CHECK(w->complete(job, "review:w2").state == "completed");
        REQUIRE(await_more(*listen_conn, listener, 1));
        CHECK(listener.payloads == std::vector<std::string>{"1", "2"});
    }
}

TEST_CASE("the completion statements themselves never notify", "[store][results]") {
    // A NOTIFY in a completion's transaction would take the cluster-wide notify lock at its
    // commit and hold it through the WAL flush, serializing every completion.
    TestDatabase db;
    base::ManualClock clock(kT0);
    store::AssignmentStore store(db.dsn());
    const auto ids = store.enqueue(1, some_jobs(3), clock.now());
    auto listen_conn = db.connect();
    ResultsListener listener(*listen_conn);
    const auto claimed = store.claim(1, {"w", 3, {}}, 10 * base::kSeconds, clock.now());
    REQUIRE(claimed.leases.size() == 3);
    const auto& one = claimed.leases[0];
    CHECK(store.complete({1, one.job_id, one.generation, "w", "r"}, clock.now()).accepted());
    std::vector<store::TransitionRequest> rest;
    for (std::size_t i = 1; i < 3; ++i) {
        rest.push_back({1, claimed.leases[i].job_id, claimed.leases[i].generation, "w", "r"});
    }
    for (const auto& t : store.complete_batch(rest, clock.now())) CHECK(t.accepted());
    // A notification committed with the completions would be waiting by now; a fresh statement
    // on the listening connection collects what has arrived.
    pqxx::nontransaction(*listen_conn).exec("SELECT 1");
    listen_conn->get_notifs();
    CHECK(listener.payloads.empty());
}

TEST_CASE("the result notifier paces its rounds: what commits meanwhile waits, then goes in one",
          "[coordinator][results]") {
    // Unpaced, a round followed nearly every DB batch: a small notifying transaction each, a
    // few percent of the claim path's throughput (docs/performance.md).
    TestDatabase db;
    // The notifier's clock, and nothing else's: its waits show where the notifier thread is.
    base::ManualClock clock(kT0);
    base::ManualClock watchdog_clock(kT0);
    coordinator::ConnectionOptions options;
    options.dsn = db.dsn();
    options.db_deadline_ms = 10000;
    coordinator::StatementWatchdog watchdog(watchdog_clock);
    const coordinator::Connections connections(options, watchdog);
    coordinator::Metrics metrics;
    auto listen_conn = db.connect();
    ResultsListener listener(*listen_conn);
    coordinator::ResultNotifier notifier(connections, metrics.results, clock);
    notifier.start();

    notifier.committed(1);
    REQUIRE(await_more(*listen_conn, listener, 0));
    CHECK(listener.payloads == std::vector<std::string>{"1"});
    REQUIRE(eventually([&] { return metrics.results.sent.load() == 1; }, 10s));

    // The clock stands still: the round after the first one waits for it, however long. A round
    // the commits started would run on the notifier thread before its next wait: once it has
    // waited twice more, such a round would have been sent and counted.
    notifier.committed(2);
    notifier.committed(3);
    notifier.committed(2);
    const auto waits = clock.waits();
    REQUIRE(eventually([&] { return clock.waits() >= waits + 2; }, 10s));
    CHECK(metrics.results.sent.load() == 1);
    // And the listener heard nothing more: a fresh statement collects what has arrived.
    pqxx::nontransaction(*listen_conn).exec("SELECT 1");
    listen_conn->get_notifs();
    CHECK(listener.payloads.size() == 1);

    clock.advance(std::chrono::duration_cast<base::Duration>(coordinator::ResultNotifier::kPace));
    REQUIRE(await_more(*listen_conn, listener, 2));
    CHECK(std::set<std::string>(listener.payloads.begin(), listener.payloads.end()) ==
          std::set<std::string>{"1", "2", "3"});
    CHECK(listener.payloads.size() == 3);
    // A round counts what it sent after its statement returned, which may be after the
    // listener heard it; stopping waits for the round.
    notifier.stop();
    CHECK(metrics.results.sent.load() == 3);
}
