// The claim under every plan (claim_plan.hpp): each combination of rate, weight and exclusion,
// single and coalesced, set up so that the served queues call for exactly that plan, and claimed
// against PostgreSQL with the assertions every claim owes whatever its plan (each job handed out
// once, its generation bumped, its lease set and audited, only the caller's organization) and the
// ones each dimension owes (a rated queue gives no more than its tokens and spends them, a
// weighted queue gets its share, an excluded reviewer is passed over).

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/ops/operator_store.hpp"
#include "common/store/assignment_store.hpp"
#include "common/store/claim_plan.hpp"
#include "tests/support/store_fixture.hpp"

using namespace aclaim;
using store::ClaimPlan;
using store::ClaimRequest;
using store::JobId;
using testing::enqueue_on;
using testing::kLease;

namespace {

/// Jobs the claims ask for: more than queue b holds, so that a flat claim reaches queue a.
constexpr int kWanted = 12;
/// The jobs of each queue of organization 1.
constexpr int kPerQueue = 8;
/// The reviewer the exclusions name, and the one they allow.
const std::string kExcluded = "W1";
const std::string kAllowed = "W2";

/// Organization 1 serving queues a and b: b's jobs outrank a's (priority 1 against 0), so a flat
/// claim takes b first. With `plan.weighted`, a has weight 4 and b 1, and the claim takes a's jobs
/// four to one instead; with `plan.rated`, a's bucket holds one token and refills once an hour;
/// with `plan.excluding`, the two best jobs of b and the best of a exclude kExcluded.
/// Organization 2 has jobs of the highest priority in both queues, which no claim of 1 may take.
struct PlanFixture : testing::StoreFixture {
    std::vector<JobId> excluded;

    explicit PlanFixture(const ClaimPlan& plan) {
        if (plan.weighted) {
            ops::QueueSettings a;
            a.weight = 4;
            configure_queue(1, "a", a);
            ops::QueueSettings b;
            b.weight = 1;
            configure_queue(1, "b", b);
        }
        if (plan.rated) {
            ops::QueueSettings a;
            a.rate_per_s = 1.0 / 3600;
            a.rate_burst = 1;
            configure_queue(1, "a", a);
        }
        const auto b = enqueue_on(store, "b", kPerQueue, clock.now(), 1);
        const auto a = enqueue_on(store, "a", kPerQueue, clock.now(), 0);
        if (plan.excluding) {
            std::vector<store::NewJob> jobs;
            for (const auto& [queue, priority] : {std::pair{"b", 1}, {"b", 1}, {"a", 0}}) {
                store::NewJob job{priority, "excludes " + kExcluded, 3};
                job.queue = queue;
                job.exclude_keys = {kExcluded};
                jobs.push_back(job);
            }
            // Due a second before the others, so that each is the best job of its queue: a claim
            // that ignored the exclusion would hand it to kExcluded first.
            excluded = store.enqueue(1, jobs, clock.now() - 1 * base::kSeconds);
        }
        enqueue_on(store, "a", 3, clock.now(), 5, 2);
        enqueue_on(store, "b", 3, clock.now(), 5, 2);
    }

    /// Generation of every job of organization 1 by id.
    std::map<JobId, long> generations() {
        pqxx::read_transaction t(store.connection());
        std::map<JobId, long> out;
        for (const auto& r : t.exec("SELECT id, generation FROM jobs WHERE org_id = 1")) {
            out[r[0].as<JobId>()] = r[1].as<long>();
        }
        return out;
    }

    long scalar(const std::string& query) {
        pqxx::read_transaction t(store.connection());
        return t.exec1(query)[0].as<long>();
    }
};

/// One claim of kWanted jobs under `plan`: one worker (kExcluded) asking for all of them, or a
/// coalesced claim of kExcluded and kAllowed asking for half each. One outcome per worker.
std::vector<store::ClaimOutcome> claim(PlanFixture& f, const ClaimPlan& plan) {
    const std::vector<std::string> queues{"a", "b"};
    if (!plan.batch) {
        return {f.store.claim(1, {kExcluded, kWanted, queues}, kLease, f.clock.now())};
    }
    return f.store.claim_batch(1,
                               std::vector<ClaimRequest>{{kExcluded, kWanted / 2, queues},
                                                         {kAllowed, kWanted / 2, queues}},
                               kLease, f.clock.now());
}

}  // namespace

TEST_CASE(
    "the claim under every plan: every combination of rate, weight and exclusion, single "
    "and coalesced",
    "[store][claim][plans]") {
    for (const ClaimPlan& plan : store::all_claim_plans()) {
        INFO("plan " << plan.name());
        PlanFixture f(plan);
        const auto before = f.generations();
        const auto outcomes = claim(f, plan);
        CHECK(std::string(f.store.last_claim_statement()) == plan.name());

        const std::vector<std::string> workers = plan.batch
                                                     ? std::vector<std::string>{kExcluded, kAllowed}
                                                     : std::vector<std::string>{kExcluded};
        REQUIRE(outcomes.size() == workers.size());
        std::set<JobId> taken;
        std::map<std::string, int> per_queue;
        for (std::size_t w = 0; w < outcomes.size(); ++w) {
            for (const auto& lease : outcomes[w].leases) {
                CHECK(taken.insert(lease.job_id).second);
                CHECK(lease.org_id == 1);
                REQUIRE(before.contains(lease.job_id));
                CHECK(lease.generation > before.at(lease.job_id));
                CHECK(lease.lease_expires_at == f.clock.now() + kLease);
                CHECK(lease.attempts == 1);
                ++per_queue[lease.queue];
                CHECK(f.scalar(
                          "SELECT count(*) FROM jobs WHERE id = " + std::to_string(lease.job_id) +
                          " AND state = 'assigned' AND assignee = '" + workers[w] +
                          "' AND generation = " + std::to_string(lease.generation)) == 1);
                if (workers[w] == kExcluded) {
                    CHECK(std::find(f.excluded.begin(), f.excluded.end(), lease.job_id) ==
                          f.excluded.end());
                }
            }
        }
        const auto claimed = static_cast<long>(taken.size());
        CHECK(claimed > 0);
        CHECK(f.scalar("SELECT count(*) FROM jobs WHERE state = 'assigned'") == claimed);
        CHECK(f.scalar("SELECT count(*) FROM job_events WHERE kind = 'claimed'") == claimed);
        CHECK(f.scalar("SELECT count(*) FROM jobs WHERE org_id = 2 AND state = 'pending'") == 6);

        // A second claim takes none of the jobs the first took.
        for (const auto& again : claim(f, plan)) {
            for (const auto& lease : again.leases) CHECK_FALSE(taken.contains(lease.job_id));
        }

        if (plan.excluding) {
            const long pending_excluded = f.scalar(
                "SELECT count(*) FROM jobs j JOIN job_exclusions x ON x.job_id = j.id "
                "WHERE j.state = 'pending'");
            if (plan.batch) {
                // Placed in kAllowed's slots: none is left behind.
                CHECK(std::count_if(f.excluded.begin(), f.excluded.end(),
                                    [&](JobId id) { return taken.contains(id); }) == 3);
            } else {
                CHECK(pending_excluded == 3);
            }
        }
        if (plan.rated) {
            // One token: one job of a, and the bucket spent, the claim short and told when the
            // bucket refills.
            CHECK(per_queue["a"] == 1);
            CHECK(f.scalar("SELECT floor(rate_tokens)::bigint FROM job_queues "
                           "WHERE org_id = 1 AND queue = 'a'") == 0);
            CHECK(std::any_of(outcomes.begin(), outcomes.end(),
                              [](const auto& o) { return o.refill_at.has_value(); }));
        } else {
            CHECK(per_queue["a"] >= 2);
            for (const auto& o : outcomes) CHECK_FALSE(o.refill_at.has_value());
        }
        if (plan.weighted) {
            CHECK(f.scalar("SELECT count(*) FROM job_queues WHERE org_id = 1 AND "
                           "weight_pass IS NOT NULL") == 2);
            // Four to one for a, which b outranks by priority; unless a's rate holds it back.
            if (!plan.rated) CHECK(per_queue["a"] > per_queue["b"]);
        } else {
            CHECK(per_queue["b"] > per_queue["a"]);
        }
    }
}
