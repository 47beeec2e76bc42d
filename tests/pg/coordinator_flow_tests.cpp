// The coordinator end to end in one process: claims, completions, renewals, reclaims and
// organization isolation, against a real PostgreSQL.

#include <catch2/catch.hpp>

#include "tests/pg/coordinator_client.hpp"
#include "tests/support/rows.hpp"

using namespace aclaim;
using namespace aclaim::testing;

using namespace std::chrono_literals;

namespace {
constexpr base::Instant kT0 = base::instant_from_micros(1'700'000'000'000'000);
}

TEST_CASE_METHOD(ManualCoordinator,
                 "claim, complete, and a re-sent completion is answered as replayed",
                 "[coordinator]") {
    const auto ids = store.enqueue(1, some_jobs(1), clock.now());
    auto w = h.worker();
    const auto welcome = w->hello("w1", 1);
    CHECK(welcome.org_id == 1);
    CHECK(welcome.lease_ms == 10000);
    CHECK(welcome.heartbeat_ms == 10000 / 3);

    const auto job = w->claim_one();
    CHECK(job.job_id == ids[0]);
    CHECK(job.generation == 1);
    // Each stage of the granted claim was timed once (the breakdown drills/bench reports). The
    // router observes the reply stage after the reply is sent, so the worker can read ASSIGNED
    // before the router has recorded it.
    const auto& stages = h.coordinator->metrics().claim_stages;
    CHECK(eventually([&] { return stages.back().snapshot().count == 1; }));
    for (const auto& stage : stages) {
        CHECK(stage.snapshot().count == 1);
    }
    CHECK(job.lease_expires_at_us == base::to_micros(kT0 + 10 * base::kSeconds));
    CHECK(job.payload == "payload-0");

    const auto complete = [&] {
        const auto req = w->next_req();
        w->send(proto::Complete{req, job.job_id, job.generation, "review:w1:1"});
        return w->expect<proto::Accepted>(req);
    };
    const auto first = complete();
    CHECK(first.state == "completed");
    CHECK_FALSE(first.replayed);
    auto conn = h.db.connect();
    CHECK(job_state(*conn, job.job_id) == "completed");

    const auto again = complete();
    CHECK(again.state == "completed");
    CHECK(again.replayed);
    CHECK(event_count(*conn, job.job_id, "completed") == 1);
    CHECK(h.coordinator->metrics().completions.load() == 2);
    CHECK(h.coordinator->metrics().replayed.load() == 1);
}

TEST_CASE_METHOD(
    ManualCoordinator,
    "a completion after the reaper took the job back is stale, and the holder was told",
    "[coordinator]") {
    store.enqueue(1, some_jobs(1), clock.now());
    auto w1 = h.greeted("w1", 1);
    auto w2 = h.greeted("w2", 1);

    const auto first = w1->claim_one();
    clock.advance(11 * base::kSeconds);
    const auto revoked = w1->expect_push<proto::Revoked>();
    CHECK(revoked.job_id == first.job_id);
    CHECK(revoked.generation == first.generation);
    CHECK(revoked.reason == "reclaimed");

    const auto second = w2->claim_one();
    CHECK(second.job_id == first.job_id);
    CHECK(second.generation == first.generation + 1);

    const auto req = w1->next_req();
    w1->send(proto::Complete{req, first.job_id, first.generation, "review:w1"});
    const auto rejected = w1->expect<proto::Rejected>(req);
    CHECK(rejected.reason == "stale_generation");

    CHECK(w2->complete(second, "review:w2").state == "completed");
    auto conn = h.db.connect();
    CHECK(results_snapshot(*conn, first.job_id).find("review:w2") != std::string::npos);
    CHECK(h.coordinator->metrics().reclaims.load() == 1);
    CHECK(h.coordinator->metrics().rejections_of(store::Rejection::StaleGeneration) == 1);
}

TEST_CASE_METHOD(ManualCoordinator, "a renewal extends a live lease and revokes an expired one",
                 "[coordinator]") {
    store.enqueue(1, some_jobs(1), clock.now());
    auto w = h.greeted("w1", 1);
    const auto job = w->claim_one();

    clock.advance(2 * base::kSeconds);
    const auto req = w->next_req();
    w->send(proto::Renew{req, job.job_id, job.generation});
    const auto lease = w->expect<proto::LeaseMsg>(req);
    CHECK(lease.job_id == job.job_id);
    CHECK(lease.lease_expires_at_us == base::to_micros(kT0 + 12 * base::kSeconds));
    CHECK(lease.lease_expires_at_us > job.lease_expires_at_us);

    clock.advance(20 * base::kSeconds);
    const auto late = w->next_req();
    w->send(proto::Renew{late, job.job_id, job.generation});
    const auto revoked = w->expect<proto::Revoked>(late);
    CHECK(revoked.reason == "lease_expired");
    CHECK(h.coordinator->metrics().renewals.load() == 1);
}

TEST_CASE_METHOD(ManualCoordinator,
                 "a session of one organization cannot touch another organization's job",
                 "[coordinator]") {
    store.enqueue(1, some_jobs(1), clock.now());
    auto owner = h.greeted("w1", 1);
    auto intruder = h.greeted("w1", 2);

    CHECK(intruder->expect<proto::NoWork>(intruder->claim()).reason == "no pending jobs");
    const auto job = owner->claim_one();
    auto conn = h.db.connect();
    const auto before = job_snapshot(*conn, job.job_id);

    const auto req = intruder->next_req();
    intruder->send(proto::Complete{req, job.job_id, job.generation, "forged"});
    CHECK(intruder->expect<proto::Rejected>(req).reason == "other_organization");
    const auto renew = intruder->next_req();
    intruder->send(proto::Renew{renew, job.job_id, job.generation});
    CHECK(intruder->expect<proto::Revoked>(renew).reason == "other_organization");
    const auto release = intruder->next_req();
    intruder->send(proto::Release{release, job.job_id, job.generation});
    CHECK(intruder->expect<proto::Rejected>(release).reason == "other_organization");

    CHECK(job_snapshot(*conn, job.job_id) == before);
    CHECK(results_snapshot(*conn, job.job_id).empty());
}

TEST_CASE_METHOD(ManualCoordinator, "fail and release are answered with the job's new state",
                 "[coordinator]") {
    store.enqueue(1, some_jobs(2), clock.now());
    auto w = h.greeted("w1", 1, proto::Encoding::Json);
    const auto a = w->claim_one();
    const auto b = w->claim_one();

    const auto release = w->next_req();
    w->send(proto::Release{release, a.job_id, a.generation});
    CHECK(w->expect<proto::Accepted>(release).state == "pending");
    const auto fail = w->next_req();
    w->send(proto::Fail{fail, b.job_id, b.generation, "cannot review", false});
    CHECK(w->expect<proto::Accepted>(fail).state == "failed");
    auto conn = h.db.connect();
    CHECK(job_state(*conn, a.job_id) == "pending");
    CHECK(job_state(*conn, b.job_id) == "failed");
}
