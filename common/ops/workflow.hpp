#pragma once

// A job's workflow as an operator sees it: every job connected to it by dependencies, each
// stage's state, who reviewed it, what it still waits for, and each edge's policy. The same for
// the console's workflow view and `aclaimctl workflow show` (docs/operations.md, "Workflows").

#include <nlohmann/json.hpp>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "common/store/assignment.hpp"

namespace aclaim::ops {

/// One job of a workflow.
struct WorkflowStage {
    store::JobId id = 0;
    /// False for a job retention removed: only its id is known (from the edges that name it).
    bool present = true;
    std::string queue;
    std::string state;
    store::Generation generation = 0;
    int attempts = 0;
    int max_attempts = 0;
    /// Who completed it (the holder of its accepted completion) or holds it now (assigned,
    /// parked); empty otherwise.
    std::string reviewer;
    std::optional<std::string> last_error;
    base::Instant enqueued_at{};
    std::optional<base::Instant> completed_at;
    /// Its dependencies that have not ended yet, in id order: what it waits for.
    std::vector<store::JobId> waits_for;
};

/// One dependency: `job` waits for `depends_on`.
struct WorkflowEdge {
    store::JobId job = 0;
    store::JobId depends_on = 0;
    std::string policy;                   ///< cancel or run: what a failed dependency does
    std::optional<std::string> resolved;  ///< how the dependency ended; empty while it has not
    std::optional<base::Instant> resolved_at;
};

struct Workflow {
    store::JobId job = 0;  ///< the job it was asked for
    store::OrgId org_id = 0;
    std::vector<WorkflowStage> stages;  ///< in id order
    std::vector<WorkflowEdge> edges;    ///< among the stages, by dependent then dependency
    /// The walk stopped at the bound: more jobs are connected than `stages` holds.
    bool truncated = false;
};

/// How many jobs a workflow view shows at most.
inline constexpr int kWorkflowMaxStages = 500;

/// The workflow of `job`, when it exists and (given `org`) is of that organization; read in one
/// repeatable-read snapshot, so stages and edges agree. At most `max_stages` jobs: those nearest
/// to `job` by dependencies.
std::optional<Workflow> read_workflow(pqxx::connection& conn, store::JobId job,
                                      std::optional<store::OrgId> org = std::nullopt,
                                      int max_stages = kWorkflowMaxStages);

/// The same, as JSON: {job, org_id, truncated, stages: [...], edges: [...]}.
nlohmann::json workflow_json(const Workflow& workflow);

}  // namespace aclaim::ops
