// What operators see of a workflow (schema/baseline/tables.sql, common/ops/workflow.hpp):
// the audit log's 'waiting' event, the workflow view read from any of its jobs and bounded, kept
// to the job's organization, and `aclaimctl workflow show` as text and JSON.

#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "common/ops/checker.hpp"
#include "common/ops/workflow.hpp"
#include "common/store/assignment_store.hpp"
#include "tests/pg/ctl_run.hpp"
#include "tests/support/new_jobs.hpp"
#include "tests/support/rows.hpp"
#include "tests/support/store_fixture.hpp"
#include "tests/support/test_database.hpp"

using namespace aclaim;
using store::job_of_this_call;
using store::JobId;
using store::NewJob;

namespace {

NewJob job(const std::string& queue, std::vector<JobId> depends_on = {},
           store::DependencyPolicy policy = store::DependencyPolicy::Cancel) {
    return testing::workflow_job(queue, queue + " review", std::move(depends_on), policy);
}

struct Fixture : testing::StoreFixture {
    std::unique_ptr<pqxx::connection> ops = db.connect();

    std::vector<JobId> enqueue(const std::vector<NewJob>& jobs, store::OrgId org = 1) {
        return store.enqueue(org, jobs, clock.now());
    }
    /// kind: detail of the job's events, oldest first.
    std::vector<std::string> events(JobId id) {
        pqxx::read_transaction t(*ops);
        std::vector<std::string> out;
        for (const auto& r : t.exec_params(
                 "SELECT kind || ': ' || detail FROM job_events WHERE job_id = $1 ORDER BY id",
                 id)) {
            out.push_back(r[0].as<std::string>());
        }
        return out;
    }
    std::vector<JobId> ids(const ops::Workflow& w) {
        std::vector<JobId> out;
        for (const auto& s : w.stages) out.push_back(s.id);
        return out;
    }
    const ops::WorkflowStage& stage(const ops::Workflow& w, JobId id) {
        const auto it = std::find_if(w.stages.begin(), w.stages.end(),
                                     [&](const auto& s) { return s.id == id; });
        REQUIRE(it != w.stages.end());
        return *it;
    }
    /// One job of the workflows' queues for `worker`; requires one.
    store::Lease claim(const std::string& worker, store::OrgId org = 1) {
        auto out = store.claim(org, {worker, 1, {"intake", "inspect", "approval"}}, testing::kLease,
                               clock.now());
        REQUIRE(out.leases.size() == 1);
        return out.leases[0];
    }
    store::TransitionRequest done(const store::Lease& l, const std::string& worker) const {
        store::TransitionRequest q{l.org_id, l.job_id, l.generation, worker};
        q.result_ref = "ref-" + std::to_string(l.job_id);
        return q;
    }
};

}  // namespace

TEST_CASE("a fan-out/fan-in workflow: its view from any job, and what the audit log says",
          "[pg][workflow]") {
    Fixture f;
    // intake -> (electrical, plumbing) -> approval; plumbing's edge runs it even if intake fails.
    const auto ids = f.enqueue({job("intake"), job("inspect", {job_of_this_call(1)}),
                                job("inspect", {job_of_this_call(1)}, store::DependencyPolicy::Run),
                                job("approval", {job_of_this_call(2), job_of_this_call(3)})});
    const JobId intake = ids[0], electrical = ids[1], plumbing = ids[2], approval = ids[3];
    // A job of another workflow of the same organization and one of another organization.
    const auto other = f.enqueue({job("intake"), job("approval", {job_of_this_call(1)})});
    f.enqueue({job("intake"), job("approval", {job_of_this_call(1)})}, 2);

    CHECK(f.events(approval) ==
          std::vector<std::string>{"enqueued: queue approval",
                                   "waiting: waits for 2 jobs: " + std::to_string(electrical) +
                                       " (cancel), " + std::to_string(plumbing) + " (cancel)"});
    CHECK(f.events(plumbing) == std::vector<std::string>{"enqueued: queue inspect",
                                                         "waiting: waits for 1 job: " +
                                                             std::to_string(intake) + " (run)"});
    CHECK(f.events(intake) == std::vector<std::string>{"enqueued: queue intake"});

    // The intake and the electrical inspection completed by w1, the plumbing held by w2.
    const auto first = f.claim("w1");
    REQUIRE(first.job_id == intake);
    REQUIRE(f.store.complete(f.done(first, "w1"), f.clock.now()).accepted());
    const auto e = f.claim("w1");
    REQUIRE(e.job_id == electrical);
    REQUIRE(f.store.complete(f.done(e, "w1"), f.clock.now()).accepted());
    const auto p = f.claim("w2");
    REQUIRE(p.job_id == plumbing);

    for (const JobId from : ids) {
        const auto w = ops::read_workflow(*f.ops, from);
        REQUIRE(w);
        CHECK(w->job == from);
        CHECK(w->org_id == 1);
        CHECK_FALSE(w->truncated);
        CHECK(f.ids(*w) == ids);  // the other workflow is not connected to it
        CHECK(w->edges.size() == 4);
    }
    const auto w = *ops::read_workflow(*f.ops, approval);
    CHECK(f.stage(w, intake).state == "completed");
    CHECK(f.stage(w, intake).reviewer == "w1");
    CHECK(f.stage(w, electrical).reviewer == "w1");
    CHECK(f.stage(w, plumbing).state == "assigned");
    CHECK(f.stage(w, plumbing).reviewer == "w2");
    CHECK(f.stage(w, approval).state == "waiting");
    CHECK(f.stage(w, approval).reviewer.empty());
    CHECK(f.stage(w, approval).waits_for == std::vector<JobId>{plumbing});
    CHECK(f.stage(w, electrical).waits_for.empty());
    const auto& edge = w.edges.at(1);  // by dependent, then dependency
    CHECK(edge.job == plumbing);
    CHECK(edge.depends_on == intake);
    CHECK(edge.policy == "run");
    CHECK(edge.resolved == std::optional<std::string>("completed"));
    const auto j = ops::workflow_json(w);
    CHECK(j["stages"].size() == 4);
    CHECK(j["edges"][3]["resolved"].is_null());

    // Kept to the organization: another organization does not find it, its own does.
    CHECK_FALSE(ops::read_workflow(*f.ops, approval, 2));
    CHECK(ops::read_workflow(*f.ops, approval, 1));
    CHECK_FALSE(ops::read_workflow(*f.ops, 999999));
    CHECK(f.ids(*ops::read_workflow(*f.ops, other[1])) == other);

    // Bounded: the nearest jobs first, the job itself among them, and said to be cut short.
    const auto cut = *ops::read_workflow(*f.ops, approval, std::nullopt, 3);
    CHECK(cut.truncated);
    CHECK(cut.stages.size() == 3);
    CHECK(f.ids(cut) == std::vector<JobId>{electrical, plumbing, approval});
    for (const auto& edge_in : cut.edges) {
        CHECK(edge_in.job != intake);
        CHECK(edge_in.depends_on != intake);
    }

    // The plumbing fails for good: the approval's edge says cancel, so it is cancelled, audited.
    store::TransitionRequest fail{1, plumbing, p.generation, "w2"};
    fail.reason = "leak";
    REQUIRE(f.store.fail(fail, f.clock.now()).accepted());
    const auto after = *ops::read_workflow(*f.ops, intake);
    CHECK(f.stage(after, approval).state == "cancelled");
    CHECK(f.stage(after, approval).waits_for.empty());
    CHECK(f.stage(after, plumbing).reviewer.empty());  // failed: nobody's review was accepted
    CHECK(f.events(approval).back() == "cancelled: was waiting: dependency " +
                                           std::to_string(plumbing) +
                                           " ended failed and the edge's policy is cancel");
    const auto report = ops::check(ops::load_history(*f.ops));
    INFO((report.violations.empty() ? "" : report.violations[0].evidence));
    CHECK(report.ok());
}

TEST_CASE("a job without dependencies gets no waiting event; one enqueued unblocked gets none",
          "[pg][workflow]") {
    Fixture f;
    const auto plain = f.enqueue({job("intake")}).at(0);
    CHECK(f.events(plain) == std::vector<std::string>{"enqueued: queue intake"});
    const auto l = f.claim("w1");
    REQUIRE(f.store.complete(f.done(l, "w1"), f.clock.now()).accepted());
    // Its dependency had completed already: unblocked at once, never waiting.
    const auto late = f.enqueue({job("approval", {plain})}).at(0);
    CHECK(f.events(late) ==
          std::vector<std::string>{"enqueued: queue approval", "unblocked: pending"});
    const auto w = *ops::read_workflow(*f.ops, plain);
    CHECK(f.ids(w) == std::vector<JobId>{plain, late});
    CHECK(w.edges.at(0).resolved == std::optional<std::string>("completed"));
}

TEST_CASE("aclaimctl workflow show: the graph as text and JSON, within an organization",
          "[pg][workflow][ctl]") {
    Fixture f;
    const auto ids = f.enqueue({job("intake"), job("inspect", {job_of_this_call(1)}),
                                job("inspect", {job_of_this_call(1)}, store::DependencyPolicy::Run),
                                job("approval", {job_of_this_call(2), job_of_this_call(3)})},
                               4);
    const auto l = f.claim("reviewer-7", 4);
    REQUIRE(l.job_id == ids[0]);
    REQUIRE(f.store.complete(f.done(l, "reviewer-7"), f.clock.now()).accepted());

    auto r =
        testing::run_ctl_ok(f.db.dsn(), {"workflow", "show", std::to_string(ids[3]), "--json"});
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["job"] == ids[3]);
    CHECK(j["org_id"] == 4);
    CHECK(j["truncated"] == false);
    REQUIRE(j["stages"].size() == 4);
    CHECK(j["stages"][0]["reviewer"] == "reviewer-7");
    CHECK(j["stages"][1]["state"] == "pending");
    CHECK(j["stages"][3]["state"] == "waiting");
    CHECK(j["stages"][3]["waits_for"] == nlohmann::json::array({ids[1], ids[2]}));
    CHECK(j["edges"][1]["policy"] == "run");

    r = testing::run_ctl(f.db.dsn(), {"workflow", "show", std::to_string(ids[0]), "--org", "4"});
    REQUIRE(r.code == 0);
    CHECK(r.out.find("workflow of job " + std::to_string(ids[0]) +
                     "  organization 4  4 jobs, 4 dependencies") != std::string::npos);
    const auto s = [](JobId id) { return std::to_string(id); };
    // The approval's line: waiting, no reviewer, what it waits for, each edge's policy.
    CHECK(r.out.find(s(ids[1]) + "," + s(ids[2])) != std::string::npos);
    CHECK(r.out.find(s(ids[1]) + " (cancel), " + s(ids[2]) + " (cancel)") != std::string::npos);
    CHECK(r.out.find(s(ids[0]) + " (run: completed)") != std::string::npos);
    CHECK(r.out.find("reviewer-7") != std::string::npos);
    CHECK(r.out.find("*" + s(ids[0])) != std::string::npos);

    r = testing::run_ctl(f.db.dsn(), {"workflow", "show", s(ids[0]), "--org", "5"});
    CHECK(r.code == 2);
    CHECK(r.err.find("does not exist in organization 5") != std::string::npos);
    CHECK(r.out.empty());
    r = testing::run_ctl(f.db.dsn(), {"workflow", "show", s(ids[3]), "--max-jobs", "2"});
    REQUIRE(r.code == 0);
    CHECK(r.out.find("2 jobs") != std::string::npos);
    CHECK(r.out.find("cut short") != std::string::npos);
}
