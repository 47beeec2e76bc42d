// A coordinator across a real promotion: the primary is killed and its streaming standby promoted
// (a new timeline), as an HA manager does.
//
// With synchronous replication nothing acknowledged is lost: a commit that was waiting for the
// standby when the primary died is in doubt, and is resolved from the row on the new primary; the
// listener LISTENs there and a claim parked on the old primary is answered from it; /readyz says
// no while nothing is writable.
//
// With a standby cut off before the primary died (the same as asynchronous replication that fell
// behind), the promotion loses commits: claims and a completion the workers were told about. The
// fencing epoch (schema/baseline/tables.sql) makes every claim on the new timeline outrank
// every generation of the lost history, so no fencing token is ever held twice and nothing the
// lost history granted can be completed.

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <utility>

#include "common/base/clock.hpp"
#include "common/ops/checker.hpp"
#include "coordinator/http/readiness.hpp"
#include "tests/pg/coordinator_client.hpp"
#include "tests/pg/pg_member.hpp"
#include "tests/support/checker_support.hpp"

using namespace aclaim;
using namespace aclaim::testing;

namespace {

/// The first generation a claim on timeline `t` may grant.
constexpr std::int64_t first_generation_of_timeline(std::int64_t t) {
    return ((t - 1) << 32) + 1;
}

coordinator::CoordinatorOptions options_for(const std::string& dsn) {
    auto o = plaintext_options(dsn);
    o.router.lease_ms = 60000;
    o.db_pool.db_threads = 1;
    return o;
}

using Token = std::pair<store::JobId, std::int64_t>;

/// COMPLETE of a job held at `generation`; the answer, whichever it is.
proto::Message complete(RawWorker& w, store::JobId job, std::int64_t generation) {
    const auto req = w.next_req();
    w.send(proto::Complete{req, job, generation, "review:" + std::to_string(job)});
    auto m = w.answer(req, 20s);
    REQUIRE(m);
    return *m;
}

void require_check_passes(const std::string& dsn) {
    const auto report = check_database(dsn);
    INFO(violations(report));
    REQUIRE(report.ok());
}

}  // namespace

TEST_CASE("a synchronous standby promoted after its primary died: nothing acknowledged is lost",
          "[coordinator][failover]") {
    spdlog::set_level(spdlog::level::critical);
    base::SystemClock clock;
    PgMember primary;
    PgMember standby(primary, /*synchronous=*/true);
    const auto jobs = store::AssignmentStore(primary.dsn).enqueue(1, some_jobs(2), clock.now());

    const std::string dsn = multi_host_dsn(primary, standby);
    coordinator::ReadinessProbe probe(dsn, clock, std::chrono::milliseconds(0));
    auto o = options_for(dsn);
    // Long enough for the promotion to come while the interrupted commit waits to be resolved,
    // and for the commit to be cut by the primary's death rather than by its deadline.
    o.db_pool.in_doubt_budget_ms = 30000;
    o.connection.db_deadline_ms = 60000;
    coordinator::Coordinator c(o, clock);
    c.start();
    GreetedWorker w(c.endpoint(), "w1", 1);
    const auto first = w.claim_one();
    const auto second = w.claim_one();
    // Acknowledged on the primary, and so on the standby too.
    REQUIRE(std::holds_alternative<proto::Accepted>(complete(w, first.job_id, first.generation)));
    const auto parked = w.claim(1, 60000);
    REQUIRE(eventually([&] { return c.metrics().parked.load() >= 1; }, 10s));
    CHECK(probe.check().ready);

    // The standby stops receiving: the next commit waits on the primary for an acknowledgement
    // that never comes, and the primary dies with it in flight.
    standby.detach();
    const auto done = w.next_req();
    w.send(proto::Complete{done, second.job_id, second.generation, "review:w1"});
    REQUIRE(eventually(
        [&] {
            return PgMember::scalar(primary.dsn,
                                    "SELECT count(*) FROM pg_stat_activity "
                                    "WHERE wait_event = 'SyncRep'") == "1";
        },
        10s));
    primary.kill();
    // Nothing is writable until the promotion.
    const auto between = probe.check();
    CHECK_FALSE(between.ready);
    INFO(between.detail);
    standby.promote();
    CHECK(probe.check().ready);
    CHECK(probe.check().detail.rfind("writable primary on timeline 2", 0) == 0);

    // The commit was in doubt: the new primary's row shows it never reached there.
    auto m = w.answer(done, 30s);
    REQUIRE(m);
    REQUIRE(std::holds_alternative<proto::Error>(*m));
    CHECK(std::get<proto::Error>(*m).code == "not_committed");
    REQUIRE(std::holds_alternative<proto::Accepted>(complete(w, second.job_id, second.generation)));
    CHECK(standby.job_state(first.job_id) == "completed");
    CHECK(standby.job_state(second.job_id) == "completed");

    // The listener LISTENs on the new primary: a job enqueued there wakes the parked claim, and
    // its generation is the first of the new timeline.
    REQUIRE(eventually(
        [&] { return standby.coordinator_sessions("aclaim-coordinator-listener") == 1; }, 20s));
    const auto fresh = store::AssignmentStore(standby.dsn).enqueue(1, some_jobs(1), clock.now());
    const auto assigned = w.expect<proto::Assigned>(parked, 15s);
    REQUIRE(assigned.jobs.size() == 1);
    CHECK(assigned.jobs[0].job_id == fresh.at(0));
    CHECK(assigned.jobs[0].generation == first_generation_of_timeline(2));
    REQUIRE(std::holds_alternative<proto::Accepted>(
        complete(w, assigned.jobs[0].job_id, assigned.jobs[0].generation)));
    c.stop();
    CHECK(jobs.size() == 2);
    require_check_passes(standby.dsn);
}

TEST_CASE("a lossy failover never hands out a fencing token twice", "[coordinator][failover]") {
    spdlog::set_level(spdlog::level::critical);
    base::SystemClock clock;
    PgMember primary;
    PgMember standby(primary, /*synchronous=*/false);
    const auto ids = store::AssignmentStore(primary.dsn).enqueue(1, some_jobs(6), clock.now());

    coordinator::Coordinator c(options_for(multi_host_dsn(primary, standby)), clock);
    c.start();
    zmq::context_t context;
    // w0's claim reaches the standby before it is cut off.
    auto w0 = std::make_unique<RawWorker>(context, c.endpoint());
    w0->hello("w0", 1);
    const auto kept = w0->claim_one();
    standby.catch_up(primary);
    standby.detach();

    // The lost history: on the old primary only. w0 gives its job back and w1 claims it at the
    // next generation, and every other job too, and completes one, and is told ACCEPTED.
    REQUIRE(std::holds_alternative<proto::Accepted>([&] {
        const auto req = w0->next_req();
        w0->send(proto::Release{req, kept.job_id, kept.generation});
        auto m = w0->answer(req, 10s);
        REQUIRE(m);
        return *m;
    }()));
    auto w1 = std::make_unique<RawWorker>(context, c.endpoint());
    w1->hello("w1", 1);
    std::set<Token> lost;
    std::int64_t retaken = 0;
    for (std::size_t i = 0; i < ids.size(); ++i) {
        const auto j = w1->claim_one();
        lost.insert({j.job_id, j.generation});
        if (j.job_id == kept.job_id) retaken = j.generation;
    }
    REQUIRE(retaken == kept.generation + 1);
    const Token acknowledged = *std::find_if(
        lost.begin(), lost.end(), [&](const Token& t) { return t.first != kept.job_id; });
    REQUIRE(std::holds_alternative<proto::Accepted>(
        complete(*w1, acknowledged.first, acknowledged.second)));

    // The old primary dies; the standby, which has none of that, is promoted.
    primary.kill();
    standby.promote();

    // On the new primary w0 still holds its job (its release was lost) and gives it back; then
    // both workers, w1 too on a new session under the same name, claim everything there is.
    w0 = std::make_unique<RawWorker>(context, c.endpoint());
    w0->hello("w0", 1);
    const auto released = send_until_accepted(*w0, proto::Release{0, kept.job_id, kept.generation});
    REQUIRE(released);
    w1 = std::make_unique<RawWorker>(context, c.endpoint());
    w1->hello("w1", 1);
    auto w2 = std::make_unique<RawWorker>(context, c.endpoint());
    w2->hello("w2", 1);
    std::map<Token, std::string> granted;  // the new history's tokens and their holders
    for (int i = 0; i < 6; ++i) {
        RawWorker& w = i % 2 == 0 ? *w1 : *w2;
        const auto a = w.expect<proto::Assigned>(w.claim(1, 0), 20s);
        REQUIRE(a.jobs.size() == 1);
        granted[{a.jobs[0].job_id, a.jobs[0].generation}] = i % 2 == 0 ? "w1" : "w2";
    }
    REQUIRE(granted.size() == ids.size());

    // No token of the new history is one of the lost history: every generation granted on
    // timeline 2 is above every generation timeline 1 could have granted, the retaken job's too
    // (counting on from the row would have granted it kept.generation + 1 again).
    for (const auto& [token, holder] : granted) {
        INFO("job " << token.first << " generation " << token.second << " held by " << holder);
        CHECK(lost.count(token) == 0);
        CHECK(token.second >= first_generation_of_timeline(2));
    }

    // Every completion from the lost history is refused on the new primary, the acknowledged
    // one re-sent included, by w1's new session too, and changes nothing.
    for (const auto& [job, generation] : lost) {
        INFO("lost token: job " << job << " generation " << generation);
        const auto m = complete(*w1, job, generation);
        REQUIRE(std::holds_alternative<proto::Rejected>(m));
        CHECK(std::get<proto::Rejected>(m).reason == "stale_generation");
        CHECK(standby.job_state(job) == "assigned");
    }
    CHECK(PgMember::scalar(standby.dsn,
                           "SELECT count(*) FROM job_events WHERE kind IN ('claimed', "
                           "'completed') AND generation < " +
                               std::to_string(first_generation_of_timeline(2)) +
                               " AND worker = 'w1'") == "0");

    // The new history's holders finish their jobs.
    for (const auto& [token, holder] : granted) {
        RawWorker& w = holder == "w1" ? *w1 : *w2;
        REQUIRE(std::holds_alternative<proto::Accepted>(complete(w, token.first, token.second)));
    }
    c.stop();
    CHECK(PgMember::scalar(standby.dsn, "SELECT count(*) FROM jobs WHERE state = 'completed'") ==
          "6");
    require_check_passes(standby.dsn);
}
