#include "common/ops/workflow.hpp"

#include <cstdint>
#include <map>

#include "common/ops/recovery.hpp"
#include "common/ops/workflow_sql.hpp"
#include "common/store/pg_array.hpp"
#include "common/store/pg_time.hpp"

namespace aclaim::ops {

namespace {

bool reviewed_by_assignee(const std::string& state) {
    return state == "completed" || state == "assigned" || state == "parked";
}

nlohmann::json instant_or_null(const std::optional<base::Instant>& t) {
    return t ? nlohmann::json(format_instant(*t)) : nlohmann::json(nullptr);
}

}  // namespace

std::optional<Workflow> read_workflow(pqxx::connection& conn, store::JobId job,
                                      std::optional<store::OrgId> org, int max_stages) {
    pqxx::transaction<pqxx::repeatable_read, pqxx::read_only> txn(conn, "workflow_show");
    // One more than shown, to know whether the walk was cut short.
    const auto reached = txn.exec_params(sql::kWorkflowJobs, job, org.value_or(0), max_stages + 1);
    if (reached.empty()) return std::nullopt;
    Workflow w;
    w.job = job;
    w.org_id = reached[0]["org_id"].as<store::OrgId>();
    std::vector<std::int64_t> ids;
    for (const auto& r : reached) ids.push_back(r["id"].as<store::JobId>());
    if (static_cast<int>(ids.size()) > max_stages) {
        w.truncated = true;
        ids.resize(static_cast<std::size_t>(max_stages));
    }
    const auto id_array = store::pg_array(ids);

    std::map<store::JobId, WorkflowStage> stages;
    for (const auto id : ids) {
        WorkflowStage s;
        s.id = id;
        s.present = false;
        stages.emplace(id, s);
    }
    for (const auto& r : txn.exec_params(sql::kWorkflowStages, w.org_id, id_array)) {
        auto& s = stages[r["id"].as<store::JobId>()];
        s.present = true;
        s.queue = r["queue"].as<std::string>();
        s.state = r["state"].as<std::string>();
        s.generation = r["generation"].as<store::Generation>();
        s.attempts = r["attempts"].as<int>();
        s.max_attempts = r["max_attempts"].as<int>();
        if (!r["assignee"].is_null() && reviewed_by_assignee(s.state)) {
            s.reviewer = r["assignee"].as<std::string>();
        }
        if (!r["last_error"].is_null()) s.last_error = r["last_error"].as<std::string>();
        s.enqueued_at = r["enqueued_us"].as<base::Instant>();
        if (!r["completed_us"].is_null()) s.completed_at = r["completed_us"].as<base::Instant>();
    }
    for (const auto& r : txn.exec_params(sql::kWorkflowEdges, w.org_id, id_array)) {
        WorkflowEdge e;
        e.job = r["job_id"].as<store::JobId>();
        e.depends_on = r["depends_on"].as<store::JobId>();
        e.policy = r["policy"].as<std::string>();
        if (!r["resolved"].is_null()) {
            e.resolved = r["resolved"].as<std::string>();
            e.resolved_at = r["resolved_us"].as<base::Instant>();
        } else {
            stages[e.job].waits_for.push_back(e.depends_on);
        }
        w.edges.push_back(std::move(e));
    }
    txn.commit();
    for (auto& entry : stages) w.stages.push_back(std::move(entry.second));
    return w;
}

nlohmann::json workflow_json(const Workflow& w) {
    nlohmann::json stages = nlohmann::json::array();
    for (const auto& s : w.stages) {
        if (!s.present) {
            stages.push_back({{"id", s.id}, {"state", "pruned"}, {"waits_for", s.waits_for}});
            continue;
        }
        stages.push_back(
            {{"id", s.id},
             {"queue", s.queue},
             {"state", s.state},
             {"generation", s.generation},
             {"attempts", s.attempts},
             {"max_attempts", s.max_attempts},
             {"reviewer",
              s.reviewer.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.reviewer)},
             {"last_error", s.last_error ? nlohmann::json(*s.last_error) : nlohmann::json(nullptr)},
             {"enqueued_at", format_instant(s.enqueued_at)},
             {"completed_at", instant_or_null(s.completed_at)},
             {"waits_for", s.waits_for}});
    }
    nlohmann::json edges = nlohmann::json::array();
    for (const auto& e : w.edges) {
        edges.push_back(
            {{"job", e.job},
             {"depends_on", e.depends_on},
             {"policy", e.policy},
             {"resolved", e.resolved ? nlohmann::json(*e.resolved) : nlohmann::json(nullptr)},
             {"resolved_at", instant_or_null(e.resolved_at)}});
    }
    return {{"job", w.job},
            {"org_id", w.org_id},
            {"truncated", w.truncated},
            {"stages", stages},
            {"edges", edges}};
}

}  // namespace aclaim::ops
