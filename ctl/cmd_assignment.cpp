// release and fail: an operator takes a stuck assignment away from its worker, on the record.
// Both are fenced on the generation the job is held at (or the one given with --generation), so
// they never touch a later holder, and both write a job_events row naming the operator.

#include <cstdio>

#include "common/base/clock.hpp"
#include "common/ops/operator_store.hpp"
#include "ctl/cmd_recover.hpp"
#include "ctl/ctl.hpp"

namespace aclaim::ctl {

namespace {

struct AssignmentArgs {
    store::JobId job = 0;
    store::Generation generation = 0;
    std::string reason;
    std::string actor = default_actor();
};

int run(const Global& global, const AssignmentArgs& a, bool release) {
    if (!release && a.reason.find_first_not_of(" \t\n") == std::string::npos) {
        throw UsageError(
            "--reason must say why; it is recorded in job_events and as the job's "
            "last error");
    }
    const std::string reason = a.reason.empty() ? "no reason given" : a.reason;
    const auto expected =
        a.generation > 0 ? std::optional<store::Generation>(a.generation) : std::nullopt;
    pqxx::connection conn(require_dsn(global));
    ops::OperatorStore store(conn);
    const auto now = global.clock.now();
    const auto out = release ? store.release(a.job, expected, a.actor, reason, now)
                             : store.fail(a.job, expected, a.actor, reason, now);
    const std::string job = "job " + std::to_string(a.job);
    using Result = ops::OperatorOutcome::Result;
    switch (out.result) {
        case Result::NotFound:
            throw UsageError(job + " does not exist");
        case Result::NotAssigned:
            throw UsageError(job + " is " + std::string(store::to_string(out.job->state)) +
                             ", not assigned: there is no assignment to " +
                             (release ? "release" : "fail"));
        case Result::Moved:
            throw UsageError(job + " is " + std::string(store::to_string(out.job->state)) +
                             " at generation " + std::to_string(out.job->generation) +
                             (expected ? ", not the generation " + std::to_string(*expected) +
                                             " given: look again with aclaimctl inspect"
                                       : ": it changed while we looked; nothing done"));
        case Result::Busy:
            throw std::runtime_error(job +
                                     " stayed locked by another transaction for 5 s; "
                                     "nothing done, try again");
        case Result::Done:
            break;
    }
    if (release) {
        std::printf(
            "%s released: taken from %s at generation %lld; pending again, attempt "
            "given back (%d of %d used); the next claim gets generation %lld\n",
            job.c_str(), out.held_by.c_str(), static_cast<long long>(out.generation),
            out.job->attempts, out.job->max_attempts, static_cast<long long>(out.generation) + 1);
    } else {
        std::printf("%s failed: taken from %s at generation %lld; final\n", job.c_str(),
                    out.held_by.c_str(), static_cast<long long>(out.generation));
    }
    std::printf("%s will be told at its next renewal, and its completion will be rejected\n",
                out.held_by.c_str());
    return 0;
}

}  // namespace

void add_assignment_commands(CLI::App& app, Global& global, Action& action) {
    auto args = std::make_shared<AssignmentArgs>();
    for (const bool release : {true, false}) {
        auto* cmd = app.add_subcommand(
            release ? "release" : "fail",
            release ? "Take a stuck assignment back: the job is pending again and the attempt "
                      "is given back"
                    : "Fail a stuck assignment for good");
        cmd->add_option("job", args->job, "Job id")->required()->check(base::whole_number(1));
        auto* reason = cmd->add_option(
            "--reason", args->reason,
            "Why, recorded in job_events" + std::string(release ? "" : " and as the last error"));
        if (!release) reason->required();
        cmd->add_option("--generation", args->generation,
                        "Act only if the job is still held at this generation (from inspect)")
            ->check(base::whole_number(1));
        cmd->add_option("--by", args->actor, "Who acts, as recorded in job_events")
            ->capture_default_str();
        cmd->callback([&global, &action, args, release] {
            action = [&global, args, release] { return run(global, *args, release); };
        });
    }
}

}  // namespace aclaim::ctl
