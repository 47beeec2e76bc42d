#include "common/ops/operator_store.hpp"
#include "common/ops/recovery_store.hpp"
#include "console/views.hpp"

// The console's actions. Each runs under row-level security in the scope of the job's (or the
// queue's) organization, through the same store method as its aclaimctl command, and lands in
// the audit log as "console:<operator>".

namespace aclaim::console {

using nlohmann::json;

namespace {

ActionResult refused(std::string why) {
    return ActionResult{ActionResult::Kind::Refused, {{"error", std::move(why)}}};
}

std::string state_of(const std::optional<ops::JobRecord>& j) {
    return j ? std::string(store::to_string(j->state)) : std::string("gone");
}

ActionResult not_found() {
    return ActionResult{ActionResult::Kind::NotFound, {{"error", "no such job"}}};
}

}  // namespace

std::optional<store::OrgId> Views::find_job(const Operator& op, store::JobId id) {
    for (const auto& s : scopes_of(op)) {
        scope(s);
        if (const auto j = ops::OperatorStore(data()).job(id)) return j->org_id;
    }
    return std::nullopt;
}

template <typename Act>
ActionResult Views::on_job(const Operator& op, store::JobId id, Act&& act) {
    return with_connections([&] {
        if (!find_job(op, id)) return not_found();
        return act();
    });
}

ActionResult Views::cancel(const Operator& op, store::JobId id, const std::string& reason,
                           base::Instant now) {
    return on_job(op, id, [&] {
        ops::OperatorStore store(data());
        const auto done = store.cancel({id}, actor_of(op), reason, now);
        if (done.empty()) {
            const auto j = store.job(id);
            return refused("job #" + std::to_string(id) + " is " + state_of(j) +
                           ": only a pending, scheduled or assigned job can be cancelled");
        }
        const auto& c = done.front();
        return ActionResult{ActionResult::Kind::Done,
                            {{"job_id", id},
                             {"state", "cancelled"},
                             {"was", c.was},
                             {"holder", c.holder.empty() ? json(nullptr) : json(c.holder)},
                             {"generation", c.generation},
                             {"by", actor_of(op)}}};
    });
}

ActionResult Views::retry(const Operator& op, store::JobId id, const std::string& reason,
                          base::Instant now) {
    return on_job(op, id, [&] {
        ops::OperatorStore store(data());
        const auto done = store.retry({id}, actor_of(op), reason, now);
        const auto j = store.job(id);
        if (done.empty()) {
            return refused("job #" + std::to_string(id) + " is " + state_of(j) +
                           ": only a failed, discarded or cancelled job can be retried");
        }
        return ActionResult{ActionResult::Kind::Done,
                            {{"job_id", id}, {"state", state_of(j)}, {"by", actor_of(op)}}};
    });
}

ActionResult Views::pause(const Operator& op, store::OrgId org, const std::string& queue,
                          bool paused, const std::string& reason) {
    return with_connections([&] {
        if (op.orgs && std::find(op.orgs->begin(), op.orgs->end(), org) == op.orgs->end())
            return ActionResult{ActionResult::Kind::NotFound, {{"error", "no such organization"}}};
        scope(std::to_string(org));
        try {
            ops::OperatorStore(data()).pause(org, queue, paused, actor_of(op), reason, clock_,
                                             /*allow_new=*/false);
        } catch (const ops::UnknownQueue& e) {
            // As aclaimctl: a misspelt queue is refused, never made into a new one.
            return ActionResult{ActionResult::Kind::NotFound, {{"error", e.what()}}};
        }
        return ActionResult{
            ActionResult::Kind::Done,
            {{"org_id", org}, {"queue", queue}, {"paused", paused}, {"by", actor_of(op)}}};
    });
}

ActionResult Views::resolve_quarantined(const Operator& op, store::JobId id, bool release,
                                        const std::string& reason, base::Instant now) {
    return on_job(op, id, [&] {
        ops::RecoveryStore store(data());
        const auto r = release ? store.release(id, reason, actor_of(op), now)
                               : store.fail(id, reason, actor_of(op), now);
        if (r.refusal) return ActionResult{ActionResult::Kind::Refused, {{"error", *r.refusal}}};
        return ActionResult{ActionResult::Kind::Done,
                            {{"job_id", id},
                             {"state", store::to_string(r.state)},
                             {"generation", r.generation},
                             {"by", actor_of(op)}}};
    });
}

ActionResult Views::resolve_lease(const Operator& op, store::JobId id, store::Generation seen,
                                  bool release, const std::string& reason, base::Instant now) {
    return with_connections([&] {
        using Result = ops::OperatorOutcome::Result;
        for (const auto& s : scopes_of(op)) {
            scope(s);
            ops::OperatorStore store(data());
            const auto r = release ? store.release(id, seen, actor_of(op), reason, now)
                                   : store.fail(id, seen, actor_of(op), reason, now);
            switch (r.result) {
                case Result::NotFound:
                    continue;  // not in this organization: try the operator's next one
                case Result::Done:
                    return ActionResult{ActionResult::Kind::Done,
                                        {{"job_id", id},
                                         {"state", store::to_string(r.job->state)},
                                         {"generation", r.generation},
                                         {"taken_from", r.held_by},
                                         {"by", actor_of(op)}}};
                case Result::NotAssigned:
                    return ActionResult{ActionResult::Kind::Refused,
                                        {{"error", "nothing holds the job any more"}}};
                case Result::Moved:
                    return ActionResult{ActionResult::Kind::Refused,
                                        {{"error", "the job was claimed again since generation " +
                                                       std::to_string(seen) + ": look again"}}};
                case Result::Busy:
                    return ActionResult{ActionResult::Kind::Refused,
                                        {{"error", "a coordinator holds the row; try again"}}};
            }
        }
        return ActionResult{ActionResult::Kind::NotFound, {{"error", "no such job"}}};
    });
}

}  // namespace aclaim::console
