// workflow show: a job's workflow (every job connected to it by dependencies), each stage's
// state, who reviewed it, what it waits for and each edge's policy, for a person or as JSON.

#include <cstdio>
#include <iostream>
#include <map>

#include "common/base/cli_flags.hpp"
#include "common/ops/recovery.hpp"
#include "common/ops/workflow.hpp"
#include "ctl/ctl.hpp"
#include "ctl/terminal.hpp"

namespace aclaim::ctl {

namespace {

std::string ids_text(const std::vector<store::JobId>& ids) {
    std::string out;
    for (const auto id : ids) out += (out.empty() ? "" : ",") + std::to_string(id);
    return out.empty() ? "-" : out;
}

/// "101 (cancel: completed)", "102 (run)": a dependency, its policy, and how it ended.
std::string dependency_text(const ops::WorkflowEdge& e) {
    return std::to_string(e.depends_on) + " (" + e.policy + (e.resolved ? ": " + *e.resolved : "") +
           ")";
}

void print_workflow(const ops::Workflow& w) {
    std::map<store::JobId, std::string> depends;
    for (const auto& e : w.edges) {
        auto& text = depends[e.job];
        text += (text.empty() ? "" : ", ") + dependency_text(e);
    }
    std::printf("workflow of job %lld  organization %lld  %zu jobs, %zu dependencies%s\n",
                static_cast<long long>(w.job), static_cast<long long>(w.org_id), w.stages.size(),
                w.edges.size(), w.truncated ? " (cut short: more jobs are connected)" : "");
    std::printf("  %-10s %-14s %-11s %-20s %-16s %s\n", "job", "queue", "state", "reviewer",
                "waits for", "depends on (policy: how it ended)");
    for (const auto& s : w.stages) {
        const auto it = depends.find(s.id);
        const std::string id = (s.id == w.job ? "*" : " ") + std::to_string(s.id);
        std::printf("  %-10s %-14s %-11s %-20s %-16s %s\n", id.c_str(),
                    one_line(s.present ? s.queue : "-", 14).c_str(),
                    s.present ? s.state.c_str() : "pruned",
                    one_line(s.reviewer.empty() ? "-" : s.reviewer, 20).c_str(),
                    one_line(ids_text(s.waits_for), 16).c_str(),
                    it == depends.end() ? "-" : it->second.c_str());
    }
}

}  // namespace

void add_workflow_command(CLI::App& app, Global& global, Action& action) {
    struct Args {
        store::JobId job = 0;
        std::int64_t org = 0;
        int max_jobs = ops::kWorkflowMaxStages;
        bool json = false;
    };
    auto args = std::make_shared<Args>();
    auto* wf = add_group(app, "workflow", "Workflows: jobs that wait for other jobs");
    auto* show = wf->add_subcommand(
        "show", "A job's workflow: each connected job's state, reviewer, what it waits for");
    show->add_option("job", args->job, "Any job of the workflow")
        ->required()
        ->check(base::whole_number(1));
    base::add_org(*show, args->org, "Only when the job is of this organization");
    show->add_option("--max-jobs", args->max_jobs, "Show at most this many jobs, nearest first")
        ->check(CLI::Range(1, 100000))
        ->capture_default_str();
    show->add_flag("--json", args->json, "Print one JSON object");
    show->callback([&global, &action, args] {
        action = [&global, args] {
            pqxx::connection conn(require_dsn(global));
            const auto w = ops::read_workflow(
                conn, args->job,
                args->org > 0 ? std::optional<store::OrgId>(args->org) : std::nullopt,
                args->max_jobs);
            if (!w) {
                throw UsageError("job " + std::to_string(args->job) + " does not exist" +
                                 (args->org > 0 ? " in organization " + std::to_string(args->org)
                                                : std::string()));
            }
            if (args->json) {
                std::cout << ops::workflow_json(*w).dump(2) << "\n";
            } else {
                print_workflow(*w);
            }
            return 0;
        };
    });
}

}  // namespace aclaim::ctl
