// The browser console's store side against a real database: operator accounts, and the pages'
// reads and actions under row-level security for an operator scoped to some organizations.

#include <catch2/catch.hpp>
#include <map>
#include <optional>

#include "common/base/clock.hpp"
#include "common/ops/operator_store.hpp"
#include "common/store/assignment_store.hpp"
#include "console/console_sql.hpp"
#include "console/operators.hpp"
#include "console/views.hpp"
#include "tests/pg/console_support.hpp"
#include "tests/support/rows.hpp"
#include "tests/support/store_fixture.hpp"
#include "tests/support/test_database.hpp"

using namespace aclaim;
using namespace aclaim::testing;

namespace {

std::vector<store::NewJob> some_jobs(int n) {
    std::vector<store::NewJob> out;
    for (int i = 0; i < n; ++i) out.push_back({0, "review-" + std::to_string(i), 3});
    return out;
}

void quarantine(pqxx::connection& conn, store::JobId id) {
    pqxx::work t(conn);
    t.exec_params(
        "UPDATE jobs SET state = 'quarantined', quarantined_from = 'pending', "
        "quarantine_reason = 'test evidence' WHERE id = $1",
        id);
    t.commit();
}

std::vector<store::OrgId> orgs_of(const nlohmann::json& overview) {
    std::vector<store::OrgId> out;
    for (const auto& o : overview["organizations"]) out.push_back(o["org_id"]);
    return out;
}

}  // namespace

TEST_CASE_METHOD(
    ConsoleDatabase,
    "console operators: passwords are kept hashed and checked, scopes read back sorted",
    "[console]") {
    console::put_operator(*conn, {"alice", std::nullopt}, "s3cret words");
    console::put_operator(*conn, {"bob", std::vector<store::OrgId>{7, 3}}, "other words");
    {
        pqxx::read_transaction t(*conn);
        const auto hash =
            t.exec1("SELECT password_hash FROM console_operators WHERE name = 'alice'")[0]
                .as<std::string>();
        CHECK(hash.rfind("$argon2id$", 0) == 0);
        CHECK(hash.find("s3cret") == std::string::npos);
    }
    const auto alice = console::authenticate(*conn, {"alice", "s3cret words"});
    REQUIRE(alice);
    CHECK_FALSE(alice->orgs);
    CHECK_FALSE(console::authenticate(*conn, {"alice", "s3cret word"}));
    CHECK_FALSE(console::authenticate(*conn, {"nobody", "s3cret words"}));
    const auto bob = console::authenticate(*conn, {"bob", "other words"});
    REQUIRE(bob);
    REQUIRE(bob->orgs);
    CHECK(*bob->orgs == std::vector<store::OrgId>{3, 7});
    CHECK(bob->sees(7));
    CHECK_FALSE(bob->sees(5));

    SECTION("a disabled operator cannot sign in until put again") {
        {
            pqxx::work t(*conn);
            t.exec("UPDATE console_operators SET disabled_at = now() WHERE name = 'alice'");
            t.commit();
        }
        CHECK_FALSE(console::authenticate(*conn, {"alice", "s3cret words"}));
        console::put_operator(*conn, {"alice", std::nullopt}, "new words");
        CHECK_FALSE(console::authenticate(*conn, {"alice", "s3cret words"}));
        CHECK(console::authenticate(*conn, {"alice", "new words"}));
    }
}

TEST_CASE_METHOD(StoreAtNow,
                 "console views: an operator scoped to one organization sees and acts only there",
                 "[console]") {
    const auto org1 = store.enqueue(1, some_jobs(2), now);
    const auto org2 = store.enqueue(2, some_jobs(2), now);
    quarantine(*conn, org1[1]);
    quarantine(*conn, org2[1]);

    console::Views views(db.dsn(), "");
    const console::Operator all{"all", std::nullopt};
    const console::Operator two{"two", std::vector<store::OrgId>{2}};

    const auto everything = views.overview(all, now);
    CHECK(orgs_of(everything) == std::vector<store::OrgId>{1, 2});
    const auto scoped = views.overview(two, now);
    REQUIRE(orgs_of(scoped) == std::vector<store::OrgId>{2});
    CHECK(scoped["organizations"][0]["counts"]["pending"] == 1);
    CHECK(scoped["organizations"][0]["counts"]["quarantined"] == 1);
    CHECK(scoped["organizations"][0]["estimated"]["pending"] == false);

    CHECK(views.job(all, org1[0], now));
    CHECK_FALSE(views.job(two, org1[0], now));
    const auto own = views.job(two, org2[0], now);
    REQUIRE(own);
    CHECK((*own)["job"]["org_id"] == 2);
    CHECK((*own)["events"].size() == 1);
    CHECK((*own)["progress"].is_null());
    // The job's saved progress (protocol 1.5) is on its page, percent and note.
    {
        const auto held = testing::claim_one(store, now, "w2", 2);
        store::TransitionRequest report{2, held.job_id, held.generation, "w2"};
        report.percent = 40;
        report.note = "half the wiring";
        report.checkpoint = "step=4";
        REQUIRE(store.progress(report, now).accepted());
        const auto page = views.job(two, held.job_id, now);
        REQUIRE(page);
        CHECK((*page)["progress"]["percent"] == 40);
        CHECK((*page)["progress"]["note"] == "half the wiring");
        CHECK((*page)["progress"]["checkpoint_bytes"] == 6);
        REQUIRE(store.release({2, held.job_id, held.generation, "w2"}, now).accepted());
    }

    const auto listed = views.jobs(two, {});
    REQUIRE(listed["jobs"].size() == 2);
    for (const auto& j : listed["jobs"]) CHECK(j["org_id"] == 2);
    const auto inbox = views.quarantine(two);
    REQUIRE(inbox["quarantined"].size() == 1);
    CHECK(inbox["quarantined"][0]["id"] == org2[1]);

    const auto before = job_snapshot(*conn, org1[1]);
    const auto refused = views.resolve_quarantined(two, org1[1], true, "not mine", now);
    CHECK(refused.kind == console::ActionResult::Kind::NotFound);
    CHECK(job_snapshot(*conn, org1[1]) == before);

    const auto released = views.resolve_quarantined(two, org2[1], true, "checked", now);
    CHECK(released.kind == console::ActionResult::Kind::Done);
    CHECK(job_state(*conn, org2[1]) == "pending");
    pqxx::read_transaction t(*conn);
    const auto ev = t.exec_params1(
        "SELECT worker, detail FROM job_events WHERE job_id = $1 AND kind = 'unquarantined'",
        org2[1]);
    CHECK(ev[0].as<std::string>() == "console:two");
    CHECK(ev[1].as<std::string>().find("checked") != std::string::npos);

    CHECK_FALSE(views.run_check(two, now));
    const auto check = views.run_check(all, now);
    REQUIRE(check);
    CHECK((*check)["jobs"] == 4);
}

TEST_CASE_METHOD(StoreAtNow,
                 "console views: a stuck assignment is taken back only at the generation seen",
                 "[console]") {
    store.enqueue(1, some_jobs(1), now);
    store.enqueue(2, some_jobs(2), now);
    const auto held1 = store.claim(1, {"w1", 1}, 60 * base::kSeconds, now);
    const auto held2 = store.claim(2, {"w2", 2}, 60 * base::kSeconds, now);
    REQUIRE(held1.leases.size() == 1);
    REQUIRE(held2.leases.size() == 2);
    const auto a = held2.leases[0];
    const auto b = held2.leases[1];

    console::Views views(db.dsn(), "");
    const console::Operator two{"two", std::vector<store::OrgId>{2}};
    const auto leases = views.leases(two, now);
    REQUIRE(leases["leases"].size() == 2);
    for (const auto& l : leases["leases"]) CHECK(l["holder"] == "w2");

    const auto other = held1.leases[0];
    const auto before = job_snapshot(*conn, other.job_id);
    CHECK(views.resolve_lease(two, other.job_id, other.generation, true, "not mine", now).kind ==
          console::ActionResult::Kind::NotFound);
    CHECK(job_snapshot(*conn, other.job_id) == before);

    const auto stale = views.resolve_lease(two, a.job_id, a.generation + 1, true, "stuck", now);
    CHECK(stale.kind == console::ActionResult::Kind::Refused);
    CHECK(job_state(*conn, a.job_id) == "assigned");

    const auto taken = views.resolve_lease(two, a.job_id, a.generation, true, "stuck", now);
    REQUIRE(taken.kind == console::ActionResult::Kind::Done);
    CHECK(taken.body["taken_from"] == "w2");
    CHECK(job_state(*conn, a.job_id) == "pending");
    CHECK(event_count(*conn, a.job_id, "released") == 1);

    const auto failed = views.resolve_lease(two, b.job_id, b.generation, false, "poison", now);
    REQUIRE(failed.kind == console::ActionResult::Kind::Done);
    CHECK(job_state(*conn, b.job_id) == "failed");
    pqxx::read_transaction t(*conn);
    CHECK(t.exec_params1("SELECT worker FROM job_events WHERE job_id = $1 AND kind = 'failed'",
                         b.job_id)[0]
              .as<std::string>() == "console:two");
}

TEST_CASE_METHOD(StoreAtNow,
                 "console overview: above the cap a count is the planner's estimate, and says so",
                 "[console]") {
    store.enqueue(1, some_jobs(static_cast<int>(console::sql::kExactCountCap) + 600), now);
    store.enqueue(2, some_jobs(3), now);
    {
        pqxx::nontransaction t(*conn);
        t.exec("ANALYZE jobs");
    }
    console::Views views(db.dsn(), "");
    const auto o = views.overview({"all", std::nullopt}, now);
    REQUIRE(orgs_of(o) == std::vector<store::OrgId>{1, 2});
    const auto& big = o["organizations"][0];
    CHECK(big["estimated"]["pending"] == true);
    // The (org_id, state) statistics make the estimate close to the truth.
    CHECK(big["counts"]["pending"].get<long long>() >= console::sql::kExactCountCap);
    CHECK(big["counts"]["pending"].get<long long>() <= console::sql::kExactCountCap + 1200);
    CHECK(big["estimated"]["completed"] == false);
    CHECK(big["counts"]["completed"] == 0);
    const auto& small = o["organizations"][1];
    CHECK(small["estimated"]["pending"] == false);
    CHECK(small["counts"]["pending"] == 3);
    CHECK(small["oldest_pending_age_ms"].get<long long>() >= 0);
}

TEST_CASE("console overview: per queue, the work still to do and the oldest claimable job",
          "[console]") {
    TestDatabase db;
    auto conn = db.connect();
    store::AssignmentStore store(db.dsn());
    base::ManualClock clock(base::SystemClock().now());
    const auto start = clock.now();
    auto job_in = [](std::string queue, std::optional<base::Instant> run_at = std::nullopt) {
        store::NewJob j{0, "review", 3};
        j.queue = std::move(queue);
        j.run_at = run_at;
        return j;
    };
    store.enqueue(1, {job_in("default"), job_in("electrical")}, start);
    clock.advance(std::chrono::seconds(30));
    store.enqueue(1, {job_in("electrical"), job_in("electrical", start + std::chrono::hours(1))},
                  clock.now());
    store.enqueue(2, {job_in("plumbing")}, clock.now());
    ops::OperatorStore(*conn).pause(1, "idle", true, "tester", "no work today", clock);
    clock.advance(std::chrono::seconds(30));

    console::Views views(db.dsn(), "");
    const auto o = views.overview({"all", std::nullopt}, clock.now());
    REQUIRE(orgs_of(o) == std::vector<store::OrgId>{1, 2});
    const auto& queues = o["organizations"][0]["queues"];
    REQUIRE(queues.size() == 3);
    CHECK(queues[0]["queue"] == "default");
    CHECK(queues[0]["counts"]["pending"] == 1);
    CHECK(queues[0]["oldest_pending_age_ms"] == 60'000);
    CHECK(queues[1]["queue"] == "electrical");
    CHECK(queues[1]["counts"]["pending"] == 2);
    CHECK(queues[1]["counts"]["scheduled"] == 1);
    CHECK(queues[1]["oldest_pending_age_ms"] == 60'000);
    // A paused queue with settings and no jobs is listed: the operator must see the switch.
    CHECK(queues[2]["queue"] == "idle");
    CHECK(queues[2]["paused"] == true);
    CHECK(queues[2]["counts"]["pending"] == 0);
    CHECK(queues[2]["oldest_pending_age_ms"].is_null());
    // The organization's oldest claimable job is the oldest over its queues.
    CHECK(o["organizations"][0]["oldest_pending_age_ms"] == 60'000);

    const auto scoped = views.overview({"two", std::vector<store::OrgId>{2}}, clock.now());
    REQUIRE(scoped["organizations"].size() == 1);
    REQUIRE(scoped["organizations"][0]["queues"].size() == 1);
    CHECK(scoped["organizations"][0]["queues"][0]["queue"] == "plumbing");
    CHECK(scoped["organizations"][0]["queues"][0]["oldest_pending_age_ms"] == 30'000);
}

TEST_CASE_METHOD(StoreAtNow,
                 "console views: cancel, retry and pause act only in the operator's organizations",
                 "[console]") {
    const auto org1 = store.enqueue(1, some_jobs(1), now);
    const auto org2 = store.enqueue(2, some_jobs(2), now);
    const auto held = store.claim(2, {"w2", 1}, 60 * base::kSeconds, now);
    REQUIRE(held.leases.size() == 1);
    const auto assigned = held.leases[0].job_id;
    const auto pending = assigned == org2[0] ? org2[1] : org2[0];

    console::Views views(db.dsn(), "");
    const console::Operator two{"two", std::vector<store::OrgId>{2}};
    using Kind = console::ActionResult::Kind;

    const auto before = job_snapshot(*conn, org1[0]);
    CHECK(views.cancel(two, org1[0], "not mine", now).kind == Kind::NotFound);
    CHECK(views.pause(two, 1, "default", true, "not mine").kind == Kind::NotFound);
    CHECK(job_snapshot(*conn, org1[0]) == before);

    const auto cancelled = views.cancel(two, assigned, "order withdrawn", now);
    REQUIRE(cancelled.kind == Kind::Done);
    CHECK(cancelled.body["was"] == "assigned");
    CHECK(cancelled.body["holder"] == "w2");
    CHECK(job_state(*conn, assigned) == "cancelled");
    {
        pqxx::read_transaction t(*conn);
        const auto ev = t.exec_params1(
            "SELECT worker, detail FROM job_events WHERE job_id = $1 AND kind = 'cancelled'",
            assigned);
        CHECK(ev[0].as<std::string>() == "console:two");
        CHECK(ev[1].as<std::string>().find("order withdrawn") != std::string::npos);
    }
    const auto again = views.cancel(two, assigned, "twice", now);
    CHECK(again.kind == Kind::Refused);
    CHECK(again.body["error"].get<std::string>().find("is cancelled") != std::string::npos);
    CHECK(views.retry(two, pending, "not finished", now).kind == Kind::Refused);
    CHECK(job_state(*conn, pending) == "pending");

    const auto retried = views.retry(two, assigned, "withdrawn by mistake", now);
    REQUIRE(retried.kind == Kind::Done);
    CHECK(retried.body["state"] == "pending");
    CHECK(event_count(*conn, assigned, "retried") == 1);

    REQUIRE(views.pause(two, 2, "default", true, "training").kind == Kind::Done);
    CHECK(store.claim(2, {"w2", 1}, 60 * base::kSeconds, now).leases.empty());
    REQUIRE(views.pause(two, 2, "default", false, "training over").kind == Kind::Done);
    CHECK(store.claim(2, {"w2", 1}, 60 * base::kSeconds, now).leases.size() == 1);
    pqxx::read_transaction t(*conn);
    CHECK(t.exec("SELECT kind || ' ' || actor FROM queue_events WHERE org_id = 2 ORDER BY id")
              .size() == 2);
    CHECK(t.exec1("SELECT count(*) FROM queue_events WHERE actor <> 'console:two'")[0].as<int>() ==
          0);
}

TEST_CASE(
    "console overview and queue list: organizations whose jobs are all assigned or all completed "
    "are found and counted through the indexes the claim and the completion write",
    "[console]") {
    // jobs_org_state holds the resting states only (schema/baseline/tables.sql): assigned rows are
    // read through jobs_assigned_queue, completed ones through jobs_finished.
    TestDatabase db;
    auto conn = db.connect();
    store::AssignmentStore store(db.dsn());
    base::ManualClock clock(base::SystemClock().now());
    const auto lease = std::chrono::duration_cast<base::Duration>(std::chrono::minutes(5));
    store::NewJob electrical{0, "review", 3};
    electrical.queue = "electrical";
    store.enqueue(1, {electrical}, clock.now());
    store.enqueue(2, {electrical, electrical}, clock.now());
    store.enqueue(3, some_jobs(1), clock.now());
    REQUIRE(store.claim(1, {"w1", 1, {"electrical"}}, lease, clock.now()).leases.size() == 1);
    const auto two = store.claim(2, {"w2", 2, {"electrical"}}, lease, clock.now()).leases;
    REQUIRE(two.size() == 2);
    clock.advance(std::chrono::seconds(10));
    for (const auto& l : two) {
        REQUIRE(store.complete({2, l.job_id, l.generation, "w2", "r"}, clock.now()).accepted());
    }
    clock.advance(std::chrono::seconds(20));

    console::Views views(db.dsn(), "");
    const auto o = views.overview({"all", std::nullopt}, clock.now());
    REQUIRE(orgs_of(o) == std::vector<store::OrgId>{1, 2, 3});
    const auto& assigned_only = o["organizations"][0];
    CHECK(assigned_only["counts"]["assigned"] == 1);
    CHECK(assigned_only["counts"]["pending"] == 0);
    REQUIRE(assigned_only["queues"].size() == 1);
    CHECK(assigned_only["queues"][0]["queue"] == "electrical");
    CHECK(assigned_only["queues"][0]["counts"]["assigned"] == 1);
    const auto& completed_only = o["organizations"][1];
    CHECK(completed_only["counts"]["completed"] == 2);
    CHECK(completed_only["counts"]["assigned"] == 0);
    long long charted = 0;
    for (const auto& n : completed_only["completions_per_minute"]) charted += n.get<long long>();
    CHECK(charted == 2);
    CHECK(o["organizations"][2]["counts"]["pending"] == 1);

    const auto queues = ops::OperatorStore(*conn).queues(std::nullopt);
    REQUIRE(queues.size() == 3);
    CHECK(queues[0].org_id == 1);
    CHECK(queues[0].count(store::JobState::Assigned) == 1);
    CHECK(queues[1].org_id == 2);
    CHECK(queues[1].queue == "electrical");
    CHECK(queues[1].count(store::JobState::Completed) == 2);
    CHECK(queues[1].count(store::JobState::Assigned) == 0);
    CHECK(queues[2].org_id == 3);
    CHECK(queues[2].count(store::JobState::Pending) == 1);
}

TEST_CASE("console overview: each queue's weight and aging, none for the others",
          "[console][weights][aging]") {
    TestDatabase db;
    auto conn = db.connect();
    ops::QueueSettings weighted;
    weighted.weight = 3;
    weighted.aging = std::chrono::seconds(30);
    const base::Instant now = base::SystemClock().now();
    ops::OperatorStore(*conn).configure(1, "bulk", weighted, "tester", now, true);
    ops::QueueSettings plain;
    plain.max_attempts = 4;
    ops::OperatorStore(*conn).configure(1, "plain", plain, "tester", now, true);
    store::AssignmentStore store(db.dsn());
    store.enqueue(1, some_jobs(1), now);  // the organization is listed by its jobs
    console::Views views(db.dsn(), "");
    const auto o = views.overview({"all", std::nullopt}, now);
    REQUIRE(orgs_of(o) == std::vector<store::OrgId>{1});
    const auto& queues = o["organizations"][0]["queues"];
    REQUIRE(queues.size() == 3);
    CHECK(queues[0]["queue"] == "bulk");
    CHECK(queues[0]["weight"] == 3);
    CHECK(queues[0]["aging_s"] == 30);
    CHECK(queues[2]["queue"] == "plain");
    CHECK(queues[2]["weight"].is_null());
    CHECK(queues[2]["aging_s"].is_null());
}

TEST_CASE_METHOD(
    StoreAtNow,
    "console views: a job's exclusions, and why it waits when every reviewer is excluded",
    "[console][exclusions]") {
    store::NewJob excluding{0, "second review", 3};
    excluding.exclude_keys = {"K1", "K2"};
    const auto ids = store.enqueue(1, {{0, "plain", 3}, excluding}, now);
    // `serving` NULL: a coordinator that does not publish which queues its reviewers serve.
    auto connected = [&](const std::string& reviewers,
                         const std::optional<std::string>& serving = std::nullopt) {
        pqxx::work t(*conn);
        t.exec_params(
            "INSERT INTO coordinator_presence (org_id, coordinator, endpoint, workers, "
            "interval_ms, started_at, seen_at, reviewers, serving) VALUES (1, 'c1', 'tcp://x', "
            "2, 1000, aclaim_ts($1), aclaim_ts($1), $2::text[], $3::jsonb) ON CONFLICT (org_id, "
            "coordinator) DO UPDATE SET reviewers = EXCLUDED.reviewers, serving = EXCLUDED.serving",
            base::to_micros(now), reviewers, serving);
        t.commit();
    };
    console::Views views(db.dsn(), "");
    const console::Operator all{"all", std::nullopt};

    const auto plain = views.job(all, ids[0], now);
    REQUIRE(plain);
    CHECK((*plain)["exclusions"].is_null());

    connected("{K1,K2}");
    auto page = views.job(all, ids[1], now);
    REQUIRE(page);
    const auto& x = (*page)["exclusions"];
    CHECK(x["reviewers"] == nlohmann::json::array({"K1", "K2"}));
    CHECK(x["connected"].size() == 2);
    CHECK(x["waits_because"] ==
          "every connected reviewer of queue default (K1, K2) is excluded from this job");

    connected("{K1,K3}");
    page = views.job(all, ids[1], now);
    REQUIRE(page);
    CHECK((*page)["exclusions"]["waits_because"].is_null());
    CHECK((*page)["exclusions"]["connected"][1]["name"] == "K3");
    CHECK((*page)["exclusions"]["connected"][1]["excluded"] == false);

    // K3 serves another queue only: it would not take the job if allowed, so the job still
    // waits because of K1 and K2.
    connected("{K1,K2,K3}", R"({"K1": ["default"], "K2": ["default", "other"], "K3": ["other"]})");
    page = views.job(all, ids[1], now);
    REQUIRE(page);
    CHECK((*page)["exclusions"]["connected"].size() == 2);
    CHECK((*page)["exclusions"]["waits_because"] ==
          "every connected reviewer of queue default (K1, K2) is excluded from this job");

    connected("{K3}", R"({"K3": ["other"]})");
    page = views.job(all, ids[1], now);
    REQUIRE(page);
    CHECK((*page)["exclusions"]["connected"].empty());
    CHECK((*page)["exclusions"]["waits_because"] == "no reviewer of queue default is connected");
}

TEST_CASE(
    "console overview: per queue, organization and in total, the last minute's rate and "
    "the time left at it",
    "[console]") {
    TestDatabase db;
    store::AssignmentStore store(db.dsn());
    const auto now = base::SystemClock().now();
    auto in_queue = [](int n, const std::string& queue) {
        auto out = some_jobs(n);
        for (auto& j : out) j.queue = queue;
        return out;
    };
    // Organization 1: "intake" 10 jobs, 4 completed 10 s ago (6 left), "archive" 3, none done.
    // Organization 2: 2 jobs, one completed ten minutes ago: no rate.
    store.enqueue(1, in_queue(10, "intake"), now - 600 * base::kSeconds);
    store.enqueue(1, in_queue(3, "archive"), now - 600 * base::kSeconds);
    store.enqueue(2, some_jobs(2), now - 900 * base::kSeconds);
    auto complete = [&](store::OrgId org, int n, const std::string& queue, base::Instant at) {
        for (const auto& l : store.claim(org, {"w", n, {queue}}, base::kSeconds, at).leases) {
            REQUIRE(store.complete({org, l.job_id, l.generation, "w", "r"}, at).accepted());
        }
    };
    complete(1, 4, "intake", now - 10 * base::kSeconds);
    complete(2, 1, "default", now - 600 * base::kSeconds);

    console::Views views(db.dsn(), "");
    for (const auto& op : {console::Operator{"all", std::nullopt},
                           console::Operator{"scoped", std::vector<store::OrgId>{1, 2}}}) {
        INFO(op.name);
        const auto o = views.overview(op, now);
        REQUIRE(orgs_of(o) == std::vector<store::OrgId>{1, 2});
        const auto& one = o["organizations"][0];
        std::map<std::string, nlohmann::json> queues;
        for (const auto& q : one["queues"]) queues[q["queue"]] = q["drain"];
        CHECK(queues["intake"]["completed_last_minute"] == 4);
        CHECK(queues["intake"]["pending"] == 6);
        CHECK(queues["intake"]["time_left_ms"] == 90'000);
        CHECK(queues["intake"]["at_least"] == false);
        CHECK(queues["archive"]["completed_last_minute"] == 0);
        CHECK(queues["archive"]["time_left_ms"].is_null());
        CHECK(one["drain"]["pending"] == 9);
        CHECK(one["drain"]["time_left_ms"] == 135'000);
        const auto& two = o["organizations"][1];
        CHECK(two["drain"]["completed_last_minute"] == 0);
        CHECK(two["drain"]["time_left_ms"].is_null());
        CHECK(o["drain"]["pending"] == 10);
        CHECK(o["drain"]["completed_last_minute"] == 4);
        CHECK(o["drain"]["time_left_ms"] == 150'000);
    }
}
