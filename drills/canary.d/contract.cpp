#include "drills/canary.d/contract.hpp"

#include <algorithm>
#include <cstdio>

namespace aclaim::drills {

namespace {

std::string fmt_ms(double ms) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f ms", ms);
    return buf;
}

std::string first_evidence(const std::vector<std::string>& lines) {
    return lines.empty() ? "" : ": " + lines.front();
}

}  // namespace

std::int64_t ContractBounds::displacement_bound(int pollers) const {
    return static_cast<std::int64_t>(claimers() - 1) * jobs_per_statement(pollers);
}

ContractBounds contract_for(const CanaryOptions& o) {
    ContractBounds b;
    b.db_threads = o.db_threads;
    b.coalesce = o.coalesce;
    return b;
}

std::vector<Rule> contract_rules(const ContractBounds& b) {
    return {
        {"no_duplicate_claim",
         "no (job, generation) is handed out twice and no job is claimed while another lease "
         "holds it"},
        {"no_stale_acceptance",
         "every accepted completion is of the job's current lease and generation"},
        {"displacement_within_bound",
         "p99 of claim-order displacement <= (k-1)*m, with k=" + std::to_string(b.claimers()) +
             " claim connections (" + std::to_string(b.db_threads) +
             " coordinator DB threads and the probe) and " +
             (b.coalesce ? std::string("m = the pollers in force (coalesced claims)")
                         : std::string("m=1 (claims not coalesced)"))},
        {"claims_never_wait_on_a_lock",
         "claim statements are never seen waiting on a lock: they pass over locked rows"},
        {"invariants_hold",
         "at the end, the invariant checker finds nothing lost, completed twice or accepted stale"},
    };
}

std::vector<Violation> judge(const Interval& in, const ContractBounds& /*bounds*/) {
    std::vector<Violation> out;
    const auto add = [&](const std::string& rule, const std::string& evidence, bool injected) {
        out.push_back(Violation{in.second, rule, evidence, injected, in.pollers, 0});
    };
    const bool inject_dup = in.injected == InjectedViolation::Kind::Duplicate;
    const bool inject_disp = in.injected == InjectedViolation::Kind::Displacement;

    const auto duplicates = in.seen.duplicate_assignments + in.audit.duplicate_claims;
    if (duplicates > 0) {
        auto lines = in.seen.duplicate_evidence;
        lines.insert(lines.end(), in.audit.evidence.begin(), in.audit.evidence.end());
        add("no_duplicate_claim",
            std::to_string(duplicates) + " duplicate claims" + first_evidence(lines), false);
    }
    if (inject_dup) {
        add("no_duplicate_claim", "1 duplicate claim (injected by --inject-violation)", true);
    }
    if (in.audit.stale_acceptances > 0) {
        add("no_stale_acceptance",
            std::to_string(in.audit.stale_acceptances) + " stale acceptances" +
                first_evidence(in.audit.evidence),
            false);
    }
    if (inject_disp) {
        add("displacement_within_bound",
            "displacement p99 " + std::to_string(in.displacement_bound + 1) + " > " +
                std::to_string(in.displacement_bound) + " (injected by --inject-violation)",
            true);
    } else if (in.displacement.p99 > in.displacement_bound) {
        add("displacement_within_bound",
            "displacement p99 " + std::to_string(in.displacement.p99) + " > " +
                std::to_string(in.displacement_bound) + " over " +
                std::to_string(in.displacement.claims) + " claims (max " +
                std::to_string(in.displacement.max) + ")",
            false);
    }
    if (in.locks.claim_waits > 0) {
        add("claims_never_wait_on_a_lock",
            std::to_string(in.locks.claim_waits) + " claim statements seen waiting on a lock (" +
                fmt_ms(in.locks.claim_wait_max_ms) + " longest)",
            false);
    }
    return out;
}

std::vector<Violation> judge_run(const RunFacts& f, const ContractBounds& b) {
    std::vector<Violation> out;
    const auto add = [&](const std::string& rule, const std::string& evidence) {
        out.push_back(Violation{-1, rule, evidence, false, 0, 0});
    };
    const auto duplicates = f.audit.duplicate_claims + f.duplicate_assignments;
    if (duplicates > 0) {
        add("no_duplicate_claim", std::to_string(duplicates) + " duplicate claims in the run" +
                                      first_evidence(f.audit.evidence));
    }
    if (f.audit.stale_acceptances > 0) {
        add("no_stale_acceptance", std::to_string(f.audit.stale_acceptances) +
                                       " stale acceptances in the run" +
                                       first_evidence(f.audit.evidence));
    }
    if (f.displacement.p99 > b.displacement_bound(f.max_pollers)) {
        add("displacement_within_bound",
            "displacement p99 " + std::to_string(f.displacement.p99) + " > " +
                std::to_string(b.displacement_bound(f.max_pollers)) + " over all " +
                std::to_string(f.displacement.claims) + " claims");
    }
    for (const auto& v : f.check.violations) {
        add("invariants_hold", std::string(ops::to_string(v.invariant)) + " job " +
                                   std::to_string(v.job_id) + ": " + v.evidence);
    }
    return out;
}

std::optional<int> BackOff::record(int level, bool violated) {
    if (!violated) {
        last_good_ = level;
        return std::nullopt;
    }
    const int target = last_good_ && *last_good_ < level ? *last_good_ : std::max(1, level / 2);
    cap_ = std::min(cap_, target);
    return cap_;
}

}  // namespace aclaim::drills
