// Protocol 1.2's COMPLETE that carries the next CLAIM, at a real coordinator: offered only to a
// HELLO that asks, answered ACCEPTED (or REJECTED) before ASSIGNED or NO_WORK, committed in one
// transaction, and refused as a pair.

#include <catch2/catch.hpp>
#include <utility>

#include "tests/pg/coordinator_client.hpp"
#include "tests/support/rows.hpp"

using namespace aclaim;
using namespace aclaim::testing;

using namespace std::chrono_literals;

namespace {

constexpr base::Instant kT0 = base::instant_from_micros(1'700'000'000'000'000);

/// The next message on the socket (those kept aside first), whatever its request id.
proto::Message next_message(RawWorker& w) {
    if (!w.others.empty()) {
        auto m = std::move(w.others.front());
        w.others.erase(w.others.begin());
        return m;
    }
    auto m = w.receive(10s);
    REQUIRE(m.has_value());
    return std::move(*m);
}

/// The two answers to a COMPLETE of `job` at `generation` that carries a one-job CLAIM, in the
/// order they arrived: the completion's must come first, each with its own request id.
template <class First, class Second>
std::pair<First, Second> complete_then_claim(RawWorker& w, store::JobId job,
                                             store::Generation generation, const std::string& ref) {
    const auto done = w.next_req();
    const auto next = w.next_req();
    proto::Complete complete{done, job, generation, ref};
    complete.next.push_back(proto::Claim{next, 1, 0});
    w.send(complete);
    const auto a = next_message(w);
    REQUIRE(std::holds_alternative<First>(a));
    CHECK(std::get<First>(a).req == done);
    const auto b = next_message(w);
    REQUIRE(std::holds_alternative<Second>(b));
    CHECK(std::get<Second>(b).req == next);
    return {std::get<First>(a), std::get<Second>(b)};
}

}  // namespace

TEST_CASE_METHOD(ManualCoordinator,
                 "COMPLETE with a next CLAIM is granted only when asked, and answered in order",
                 "[coordinator][complete_claim]") {
    const auto ids = store.enqueue(1, some_jobs(3), clock.now());

    // A 1.1 HELLO gets a 1.1 WELCOME: no features.
    auto old = h.worker();
    CHECK(old->hello("old", 1).features.empty());

    auto w = h.worker(GENERATE(proto::Encoding::Binary, proto::Encoding::Json));
    const auto welcome = w->hello("w1", 1, {std::string(proto::kFeatureCompleteClaim)});
    REQUIRE(welcome.features ==
            std::vector<std::string>{std::string(proto::kFeatureCompleteClaim)});

    const auto first = w->claim_one();
    CHECK(first.job_id == ids[0]);
    // The completion's answer first, then the claim's.
    const auto [accepted, assigned] = complete_then_claim<proto::Accepted, proto::Assigned>(
        *w, first.job_id, first.generation, "review:w1:1");
    CHECK(accepted.state == "completed");
    REQUIRE(assigned.jobs.size() == 1);
    CHECK(assigned.jobs[0].job_id == ids[1]);

    auto conn = h.db.connect();
    CHECK(job_state(*conn, first.job_id) == "completed");
    CHECK(job_state(*conn, ids[1]) == "assigned");
    // One transaction: the completion's and the claim's events carry the same transaction id.
    {
        pqxx::read_transaction t(*conn);
        CHECK(t.exec_params1("SELECT count(DISTINCT xmin::text) FROM job_events "
                             "WHERE (job_id = $1 AND kind = 'completed') "
                             "OR (job_id = $2 AND kind = 'claimed')",
                             first.job_id, ids[1])[0]
                  .as<long>() == 1);
    }

    // A stale completion is refused, and the claim it carried is still served.
    const auto [rejected, again] = complete_then_claim<proto::Rejected, proto::Assigned>(
        *w, first.job_id, first.generation + 5, "review:w1:late");
    CHECK(rejected.reason == "stale_generation");
    CHECK(again.jobs.at(0).job_id == ids[2]);

    // Nothing left: the carried claim is answered NO_WORK after the completion's ACCEPTED.
    const auto last = assigned.jobs[0];
    complete_then_claim<proto::Accepted, proto::NoWork>(*w, last.job_id, last.generation,
                                                        "review:w1:2");
}

TEST_CASE("a COMPLETE refused before the database answers its carried CLAIM too",
          "[coordinator][complete_claim]") {
    base::ManualClock clock(kT0);
    CoordinatorHarness h(clock);
    auto w = h.worker();
    // No session yet: both requests are answered no_session.
    const auto done = w->next_req();
    const auto next = w->next_req();
    proto::Complete complete{done, 1, 1, "r"};
    complete.next.push_back(proto::Claim{next, 1, 0});
    w->send(complete);
    CHECK(w->expect<proto::Error>(done).code == "no_session");
    CHECK(w->expect<proto::Error>(next).code == "no_session");
}
