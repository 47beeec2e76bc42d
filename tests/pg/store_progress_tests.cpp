// Progress and checkpoints (protocol 1.5, schema/baseline/tables.sql): a report is stored only
// while its generation holds a live lease, refused like a completion otherwise and changing
// nothing; the checkpoint outlives the generation that wrote it and reaches the next holder's
// claim; a checkpoint is audited, a bare percentage is not. At a real coordinator: PROGRESS is
// answered ACCEPTED or REJECTED, an oversized one ERROR invalid, and ASSIGNED carries `resume` only
// to a worker granted the feature.

#include <barrier>
#include <catch2/catch.hpp>
#include <pqxx/pqxx>
#include <thread>

#include "common/store/assignment_store.hpp"
#include "tests/pg/coordinator_client.hpp"
#include "tests/support/rows.hpp"
#include "tests/support/store_fixture.hpp"

using namespace aclaim;
using namespace aclaim::testing;
using store::JobState;
using store::Rejection;
using store::TransitionRequest;
using testing::kLease;

using namespace std::chrono_literals;

namespace {

/// The job's progress row as text; empty when it has none.
std::string progress_snapshot(pqxx::connection& c, store::JobId id) {
    pqxx::read_transaction t(c);
    const auto r = t.exec_params(
        "SELECT concat_ws('|', generation, percent, note, checkpoint) FROM job_progress "
        "WHERE job_id = $1",
        id);
    return r.empty() ? "" : r[0][0].as<std::string>();
}

TransitionRequest report(const store::Lease& l, const std::string& worker, int percent,
                         std::string checkpoint, store::OrgId org = 1) {
    TransitionRequest q{org, l.job_id, l.generation, worker};
    q.percent = percent;
    q.note = "at " + std::to_string(percent) + "%";
    q.checkpoint = std::move(checkpoint);
    return q;
}

}  // namespace

TEST_CASE_METHOD(testing::HeldByA,
                 "progress is stored for the holder; a bare percentage keeps the checkpoint",
                 "[store][progress]") {
    CHECK(progress_snapshot(c, id).empty());

    auto t = store.progress(report(held, "a", 30, "step=3"), clock.now());
    REQUIRE(t.accepted());
    CHECK(t.state == JobState::Assigned);
    CHECK(progress_snapshot(c, id) == "1|30|at 30%|step=3");
    CHECK(testing::event_count(c, id, "checkpoint") == 1);

    // Percent and note alone: the checkpoint stays, and nothing more is audited.
    t = store.progress(report(held, "a", 45, ""), clock.now());
    REQUIRE(t.accepted());
    CHECK(progress_snapshot(c, id) == "1|45|at 45%|step=3");
    CHECK(testing::event_count(c, id, "checkpoint") == 1);

    // The lease is not extended by a report.
    const auto lease_before = testing::job_snapshot(c, id);
    clock.advance(1s);
    REQUIRE(store.progress(report(held, "a", 50, "step=5"), clock.now()).accepted());
    CHECK(testing::job_snapshot(c, id) == lease_before);
    CHECK(testing::event_count(c, id, "checkpoint") == 2);
}

TEST_CASE_METHOD(
    testing::HeldByA,
    "a stale, expired, foreign or other worker's report is refused and changes nothing",
    "[store][progress][fencing]") {
    REQUIRE(store.progress(report(held, "a", 60, "step=6"), clock.now()).accepted());
    const auto saved = progress_snapshot(c, id);

    SECTION("another worker quoting the holder's generation") {
        const auto t = store.progress(report(held, "b", 90, "step=9"), clock.now());
        REQUIRE_FALSE(t.accepted());
        CHECK(*t.rejection == Rejection::NotAssignee);
    }
    SECTION("another organization") {
        const auto t = store.progress(report(held, "a", 90, "step=9", 2), clock.now());
        REQUIRE_FALSE(t.accepted());
        CHECK(*t.rejection == Rejection::OtherOrganization);
    }
    SECTION("an expired lease, not yet reclaimed") {
        clock.advance(kLease);
        const auto t = store.progress(report(held, "a", 90, "step=9"), clock.now());
        REQUIRE_FALSE(t.accepted());
        CHECK(*t.rejection == Rejection::LeaseExpired);
    }
    SECTION("a stale generation, after the reclaim and the next claim") {
        clock.advance(kLease);
        REQUIRE(store.reclaim_expired(clock.now(), 10).size() == 1);
        const auto fresh = claim("b");
        REQUIRE(fresh.generation > held.generation);
        const auto t = store.progress(report(held, "a", 90, "step=9"), clock.now());
        REQUIRE_FALSE(t.accepted());
        CHECK(*t.rejection == Rejection::StaleGeneration);
        // The current holder may overwrite it, and its row then belongs to its generation.
        REQUIRE(store.progress(report(fresh, "b", 70, "step=7"), clock.now()).accepted());
        CHECK(progress_snapshot(c, id) == std::to_string(fresh.generation) + "|70|at 70%|step=7");
        return;
    }
    SECTION("a completed job") {
        REQUIRE(store.complete({1, id, held.generation, "a", "done"}, clock.now()).accepted());
        const auto t = store.progress(report(held, "a", 90, "step=9"), clock.now());
        REQUIRE_FALSE(t.accepted());
        CHECK(*t.rejection == Rejection::AlreadyTerminal);
    }
    CHECK(progress_snapshot(c, id) == saved);
    CHECK(testing::event_count(c, id, "checkpoint") == 1);
}

TEST_CASE_METHOD(testing::HeldByA,
                 "a refused report from the job's organization is audited 'rejected'",
                 "[store][progress][fencing]") {
    auto stale = held;
    stale.generation += 5;
    REQUIRE_FALSE(store.progress(report(stale, "a", 10, "x"), clock.now()).accepted());
    CHECK(testing::event_count(store.connection(), id, "rejected") == 1);
}

TEST_CASE("the checkpoint reaches the next holder's claim, alone or coalesced",
          "[store][progress]") {
    testing::StoreFixture f;
    const auto resumed = f.enqueue_one();
    const auto plain = f.enqueue_one();
    const auto a = f.store.claim(1, {"a", 2}, kLease, f.clock.now());
    REQUIRE(a.leases.size() == 2);
    for (const auto& l : a.leases) CHECK_FALSE(l.resume.has_value());
    const auto& first = a.leases[0].job_id == resumed ? a.leases[0] : a.leases[1];
    REQUIRE(f.store.progress(report(first, "a", 60, "step=6"), f.clock.now()).accepted());
    f.clock.advance(kLease);
    REQUIRE(f.store.reclaim_expired(f.clock.now(), 10).size() == 2);

    std::vector<store::Lease> leases;
    if (GENERATE(false, true)) {
        const store::ClaimRequest requests[] = {{"b", 1}, {"c", 1}};
        for (auto& o : f.store.claim_batch(1, requests, kLease, f.clock.now())) {
            for (auto& l : o.leases) leases.push_back(l);
        }
    } else {
        leases = f.store.claim(1, {"b", 2}, kLease, f.clock.now()).leases;
    }
    REQUIRE(leases.size() == 2);
    for (const auto& l : leases) {
        if (l.job_id == plain) {
            CHECK_FALSE(l.resume.has_value());
            continue;
        }
        REQUIRE(l.job_id == resumed);
        REQUIRE(l.resume.has_value());
        CHECK(l.resume->generation == first.generation);
        CHECK(l.resume->percent == 60);
        CHECK(l.resume->note == "at 60%");
        CHECK(l.resume->checkpoint == "step=6");
    }
}

TEST_CASE("a report racing the reaper is stored by a generation that held the job, or refused",
          "[store][progress][fencing]") {
    testing::StoreFixture f;
    store::AssignmentStore other(f.db.dsn());
    const auto id = f.enqueue_one();
    const auto held = f.claim("a");
    // The report is sent at the last instant of the lease, the reaper runs at its end.
    const auto last = held.lease_expires_at - 1us;
    std::barrier start(2);
    store::Transition t;
    std::thread reporter([&] {
        start.arrive_and_wait();
        t = other.progress(report(held, "a", 60, "step=6"), last);
    });
    start.arrive_and_wait();
    auto reclaimed = f.store.reclaim_expired(held.lease_expires_at, 10);
    reporter.join();
    // The reaper passes over a row another transaction holds (SKIP LOCKED): when the report held
    // it at that instant, the reaper's next pass, after the report's commit, takes the job back.
    if (reclaimed.empty()) reclaimed = f.store.reclaim_expired(held.lease_expires_at, 10);
    REQUIRE(reclaimed.size() == 1);
    auto& c = f.store.connection();
    if (t.accepted()) {
        CHECK(progress_snapshot(c, id) == std::to_string(held.generation) + "|60|at 60%|step=6");
    } else {
        CHECK(progress_snapshot(c, id).empty());
    }
    // Whichever came first, the next holder's generation is higher and reads what was stored.
    const auto next = f.claim("b");
    CHECK(next.generation > held.generation);
    CHECK(next.resume.has_value() == t.accepted());
}

TEST_CASE("a row-security store saves and hands on progress within its organization only",
          "[store][progress][security]") {
    TestDatabase db;
    store::StoreOptions o;
    o.row_security = true;
    store::AssignmentStore store(db.dsn(), o);
    base::ManualClock clock(testing::kT0);
    const auto id = store.enqueue(1, {{0, "a", 3}}, clock.now()).at(0);
    const auto held = testing::claim_one(store, clock.now(), "a");
    REQUIRE(store.progress(report(held, "a", 40, "step=4"), clock.now()).accepted());
    const auto foreign = store.progress(report(held, "a", 80, "step=8", 2), clock.now());
    REQUIRE_FALSE(foreign.accepted());
    CHECK(*foreign.rejection == Rejection::OtherOrganization);
    clock.advance(kLease);
    REQUIRE(store.reclaim_expired(clock.now(), 10).size() == 1);
    const auto next = testing::claim_one(store, clock.now(), "b");
    REQUIRE(next.job_id == id);
    REQUIRE(next.resume.has_value());
    CHECK(next.resume->checkpoint == "step=4");
}

TEST_CASE_METHOD(testing::HeldByA, "a removed job takes its progress with it",
                 "[store][progress][retention]") {
    REQUIRE(store.progress(report(held, "a", 10, "step=1"), clock.now()).accepted());
    auto conn = db.connect();
    pqxx::work txn(*conn);
    txn.exec_params("DELETE FROM jobs WHERE id = $1", id);
    CHECK(txn.exec1("SELECT count(*) FROM job_progress")[0].as<long>() == 0);
}

TEST_CASE("PROGRESS at a coordinator: answered, fenced, bounded; ASSIGNED resumes only if asked",
          "[coordinator][progress]") {
    base::ManualClock clock(testing::kT0);
    testing::CoordinatorHarness h(clock);
    store::AssignmentStore store(h.db.dsn());
    const auto id = store.enqueue(1, testing::some_jobs(1), clock.now()).at(0);
    const auto enc = GENERATE(proto::Encoding::Binary, proto::Encoding::Json);
    auto w = h.worker(enc);
    const auto welcome = w->hello("w1", 1, {std::string(proto::kFeatureProgress)});
    REQUIRE(welcome.features == std::vector<std::string>{std::string(proto::kFeatureProgress)});
    const auto job = w->claim_one();
    REQUIRE(job.job_id == id);
    auto& c = store.connection();

    const auto saved = w->expect<proto::Accepted>(w->request(
        proto::Progress{0, job.job_id, job.generation, 60, "checked the wiring", "step=6"}));
    CHECK(saved.state == "assigned");
    CHECK(progress_snapshot(c, id) == "1|60|checked the wiring|step=6");

    SECTION("an oversized checkpoint or a percentage out of range is refused, nothing lost") {
        const auto big = w->expect<proto::Error>(
            w->request(proto::Progress{0, job.job_id, job.generation, 70, "",
                                       std::string(proto::kMaxCheckpointBytes + 1, 'x')}));
        CHECK(big.code == "invalid");
        CHECK(big.text.find("checkpoint") != std::string::npos);
        const auto over = w->expect<proto::Error>(
            w->request(proto::Progress{0, job.job_id, job.generation, 101, "", "step=10"}));
        CHECK(over.code == "invalid");
        CHECK(over.text.find("percent") != std::string::npos);
        const auto note = w->expect<proto::Error>(
            w->request(proto::Progress{0, job.job_id, job.generation, 70,
                                       std::string(proto::kMaxProgressNoteBytes + 1, 'n'), ""}));
        CHECK(note.code == "invalid");
        CHECK(progress_snapshot(c, id) == "1|60|checked the wiring|step=6");
    }
    SECTION("the next holder: ASSIGNED's resume when granted, nothing new when not") {
        clock.advance(std::chrono::milliseconds(10001));
        REQUIRE(testing::eventually([&] { return testing::job_state(c, id) == "pending"; }, 10s));
        // The stale holder's report is refused like its completion.
        const auto stale = w->expect<proto::Rejected>(
            w->request(proto::Progress{0, job.job_id, job.generation, 90, "", "step=9"}));
        CHECK(stale.reason == "lease_expired");
        const bool asks = GENERATE(true, false);
        auto next = h.worker(enc);
        next->hello("w2", 1,
                    asks ? std::vector<std::string>{std::string(proto::kFeatureProgress)}
                         : std::vector<std::string>{});
        const auto assigned = next->expect<proto::Assigned>(next->claim());
        REQUIRE(assigned.jobs.size() == 1);
        CHECK(assigned.jobs[0].generation == job.generation + 1);
        if (asks) {
            REQUIRE(assigned.resume.size() == 1);
            CHECK(assigned.resume[0].job_id == id);
            CHECK(assigned.resume[0].generation == job.generation);
            CHECK(assigned.resume[0].percent == 60);
            CHECK(assigned.resume[0].checkpoint == "step=6");
        } else {
            CHECK(assigned.resume.empty());
        }
        const auto late = w->expect<proto::Rejected>(
            w->request(proto::Progress{0, job.job_id, job.generation, 95, "", "step=9"}));
        CHECK(late.reason == "stale_generation");
        CHECK(progress_snapshot(c, id) == "1|60|checked the wiring|step=6");
    }
}
