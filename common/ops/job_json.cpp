#include "common/ops/job_json.hpp"

#include "common/ops/recovery.hpp"
#include "common/store/job_states.hpp"

namespace aclaim::ops {

namespace {

nlohmann::json instant(const std::optional<base::Instant>& t) {
    return t ? nlohmann::json(ops::format_instant(*t)) : nlohmann::json(nullptr);
}

}  // namespace

nlohmann::json job_json(const JobRecord& j) {
    auto opt_text = [](const std::optional<std::string>& s) {
        return s ? nlohmann::json(*s) : nlohmann::json(nullptr);
    };
    return {{"id", j.id},
            {"org_id", j.org_id},
            {"state", store::to_string(j.state)},
            {"queue", j.queue},
            {"run_at", ops::format_instant(j.run_at)},
            {"deadline", instant(j.deadline)},
            {"dedupe_key", opt_text(j.dedupe_key)},
            {"priority", j.priority},
            {"base_priority",
             j.base_priority ? nlohmann::json(*j.base_priority) : nlohmann::json(nullptr)},
            {"generation", j.generation},
            {"attempts", j.attempts},
            {"max_attempts", j.max_attempts},
            {"assignee", opt_text(j.assignee)},
            {"enqueued_at", ops::format_instant(j.enqueued_at)},
            {"claimed_at", instant(j.claimed_at)},
            {"lease_expires_at", instant(j.lease_expires_at)},
            {"completed_at", instant(j.completed_at)},
            {"result_ref", opt_text(j.result_ref)},
            {"last_error", opt_text(j.last_error)},
            {"quarantined_from", opt_text(j.quarantined_from)},
            {"quarantine_reason", opt_text(j.quarantine_reason)},
            {"payload", opt_text(j.payload)}};
}

nlohmann::json event_json(const store::AuditEvent& e) {
    return {{"id", e.id},
            {"org_id", e.org_id},
            {"generation", e.generation},
            {"kind", e.kind},
            {"worker", e.worker.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.worker)},
            {"at", ops::format_instant(e.at)},
            {"detail", e.detail}};
}

nlohmann::json progress_json(const ProgressRecord& p) {
    return {{"generation", p.generation},
            {"percent", p.percent},
            {"note", p.note},
            {"checkpoint_bytes", p.checkpoint_bytes},
            {"updated_at", ops::format_instant(p.updated_at)}};
}

namespace {

nlohmann::json optional_text(const std::optional<std::string>& t) {
    return t ? nlohmann::json(*t) : nlohmann::json(nullptr);
}

nlohmann::json dependencies_json(const std::vector<DependencyRecord>& edges) {
    auto out = nlohmann::json::array();
    for (const auto& d : edges) {
        out.push_back({{"job", d.job},
                       {"policy", d.policy},
                       {"resolved", optional_text(d.resolved)},
                       {"state", optional_text(d.state)}});
    }
    return out;
}

}  // namespace

nlohmann::json exclusions_json(const std::vector<ExclusionRecord>& exclusions) {
    nlohmann::json out{{"reviewers", nlohmann::json::array()},
                       {"completers_of", nlohmann::json::array()}};
    for (const auto& x : exclusions) {
        if (x.reviewer) {
            out["reviewers"].push_back(*x.reviewer);
        } else if (x.completer_of) {
            out["completers_of"].push_back({{"job", *x.completer_of},
                                            {"state", optional_text(x.named_state)},
                                            {"completer", optional_text(x.completer)}});
        }
    }
    return out;
}

nlohmann::json links_json(const JobLinks& links) {
    return {{"depends_on", dependencies_json(links.depends_on)},
            {"dependents", dependencies_json(links.dependents)},
            {"more_depends_on", links.more_depends_on},
            {"more_dependents", links.more_dependents},
            {"exclusions", exclusions_json(links.exclusions)}};
}

nlohmann::json drain_json(const DrainRate& rate) {
    const auto left = rate.time_left();
    return {
        {"pending", rate.pending},
        {"completed_last_minute", rate.completed_last_minute},
        {"rate_per_s", rate.per_second()},
        {"time_left_ms",
         left ? nlohmann::json(std::chrono::duration_cast<std::chrono::milliseconds>(*left).count())
              : nlohmann::json(nullptr)}};
}

namespace {

template <typename Counted>
nlohmann::json counts_json(const Counted& counted) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [state, name] : store::kJobStates)
        out[std::string(name)] = counted.count(state);
    return out;
}

}  // namespace

nlohmann::json state_counts_json(const OrgStatus& status) {
    return counts_json(status);
}

nlohmann::json state_counts_json(const QueueStatus& status) {
    return counts_json(status);
}

nlohmann::json park_json(const ParkRecord& p) {
    return {{"generation", p.generation},
            {"parked_by", p.parked_by},
            {"note", p.note},
            {"parked_at", ops::format_instant(p.parked_at)},
            {"deadline", ops::format_instant(p.deadline)},
            {"used_at",
             p.used_at ? nlohmann::json(ops::format_instant(*p.used_at)) : nlohmann::json(nullptr)},
            {"used_by", p.used_by},
            {"outcome", p.outcome}};
}

nlohmann::json check_report_json(const CheckReport& report) {
    nlohmann::json out{{"ok", report.ok()},
                       {"jobs", report.jobs},
                       {"events", report.events},
                       {"states", report.states},
                       {"accepted_completions", report.accepted_completions},
                       {"rejections", report.rejections},
                       {"reclaims", report.reclaims},
                       {"pruned", report.pruned},
                       {"pruned_with_history", report.pruned_with_history},
                       {"violations", nlohmann::json::array()}};
    for (const auto& v : report.violations) {
        out["violations"].push_back({{"invariant", to_string(v.invariant)},
                                     {"job_id", v.job_id},
                                     {"evidence", v.evidence}});
    }
    return out;
}

}  // namespace aclaim::ops
