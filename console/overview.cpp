#include <algorithm>
#include <map>

#include "common/ops/job_json.hpp"
#include "common/ops/operator_store.hpp"
#include "common/store/job_states.hpp"
#include "common/store/pg_array.hpp"
#include "common/store/pg_time.hpp"
#include "console/console_sql.hpp"
#include "console/views.hpp"

// The overview page: per organization, counts by state (exact up to a cap, the planner's estimate
// above it), leases, completions per minute, rejections, per queue the work still to do, and per
// queue, organization and in total the completion rate over the last minute with the time left.

namespace aclaim::console {

using nlohmann::json;

namespace {

constexpr int kMinutesCharted = 60;

json age_ms(base::Instant now, base::Micros since_us) {
    return json((base::to_micros(now) - since_us) / 1000);
}

}  // namespace

void Views::queue_overview(pqxx::transaction_base& txn, const std::vector<store::OrgId>& orgs,
                           base::Instant now, std::map<store::OrgId, json>& by_org) {
    std::map<store::OrgId, base::Micros> oldest;
    ops::QueueQuery query;
    query.orgs = orgs;
    query.states.assign(store::kQueueStates.begin(), store::kQueueStates.end());
    query.cap = sql::kExactCountCap;
    query.queues_per_state = sql::kQueuesShown;
    query.now = now;
    const auto completions = ops::completions_last_minute(txn, orgs, now);
    for (const auto& [key, n] : completions) {
        const auto it = by_org.find(key.first);
        if (it != by_org.end())
            it->second["completed_last_minute"] =
                it->second["completed_last_minute"].get<std::int64_t>() + n;
    }
    for (const auto& q : ops::count_queues(txn, query)) {
        const auto it = by_org.find(q.org_id);
        if (it == by_org.end()) continue;
        json counts = json::object();
        for (const auto state : store::kQueueStates) {
            counts[std::string(store::state_name(state))] = q.count(state);
        }
        json row = {
            {"queue", q.queue},
            {"paused", q.paused},
            {"max_assigned", q.max_assigned ? json(*q.max_assigned) : json(nullptr)},
            {"rate_per_s", q.rate_per_s ? json(*q.rate_per_s) : json(nullptr)},
            {"rate_burst", q.rate_burst ? json(*q.rate_burst) : json(nullptr)},
            {"rate_tokens", q.rate_tokens ? json(*q.rate_tokens) : json(nullptr)},
            {"weight", q.weight ? json(*q.weight) : json(nullptr)},
            {"aging_s",
             q.aging ? json(std::chrono::duration_cast<std::chrono::seconds>(*q.aging).count())
                     : json(nullptr)},
            {"counts", counts},
            {"oldest_pending_age_ms", nullptr}};
        const auto done = completions.find({q.org_id, q.queue});
        row["drain"] = ops::drain_json({q.pending, done == completions.end() ? 0 : done->second});
        // A count past the cap is a floor: so is the time left from it.
        row["drain"]["at_least"] = q.pending > sql::kExactCountCap;
        if (q.oldest_pending_us) {
            const auto us = *q.oldest_pending_us;
            row["oldest_pending_age_ms"] = age_ms(now, us);
            const auto o = oldest.find(q.org_id);
            if (o == oldest.end() || us < o->second) oldest[q.org_id] = us;
        }
        it->second["queues"].push_back(std::move(row));
    }
    for (const auto& [org, us] : oldest) by_org[org]["oldest_pending_age_ms"] = age_ms(now, us);
}

json Views::overview(const Operator& op, base::Instant now) {
    return with_connections([&] {
        const auto since = now - std::chrono::minutes(kMinutesCharted);
        std::vector<store::OrgId> orgs;
        if (op.orgs) {
            orgs = *op.orgs;
        } else {
            pqxx::read_transaction txn(meta());
            for (const auto& r : txn.exec(sql::kOrganizations))
                orgs.push_back(r[0].as<store::OrgId>());
        }
        std::map<store::OrgId, json> by_org;
        for (const auto org : orgs) {
            json counts = json::object();
            json estimated = json::object();
            for (const auto& s : store::kJobStates) {
                counts[std::string(s.name)] = 0;
                estimated[std::string(s.name)] = false;
            }
            by_org[org] = {{"org_id", org},
                           {"counts", counts},
                           {"estimated", estimated},
                           {"leases_out", 0},
                           {"leases_expired", 0},
                           {"oldest_pending_age_ms", nullptr},
                           {"completed_last_minute", 0},
                           {"queues", json::array()},
                           {"coordinators", json::array()},
                           {"completions_per_minute", std::vector<long long>(kMinutesCharted, 0)},
                           {"rejections", json::object()}};
        }
        // The planner's estimates, read as the login role (the statistics are the owner's):
        // growing states far above the cap are not counted at all.
        std::map<std::pair<store::OrgId, std::string>, long long> estimates;
        {
            pqxx::read_transaction txn(meta());
            for (const auto& r : txn.exec(sql::kStateEstimates)) {
                estimates[{r["org_id"].as<store::OrgId>(), r["state"].as<std::string>()}] =
                    r["estimate"].as<long long>();
            }
        }
        auto estimate_of = [&](store::OrgId org, const std::string& state) -> long long {
            const auto it = estimates.find({org, state});
            return it == estimates.end() ? -1 : it->second;
        };
        std::vector<std::pair<store::OrgId, std::string>> to_estimate;
        for (const auto& s : scopes_of(op)) {
            std::vector<store::OrgId> in_scope;
            if (op.orgs) {
                in_scope = {std::stoll(s)};
            } else {
                in_scope = orgs;
            }
            std::vector<store::OrgId> count_orgs;
            std::vector<std::string> count_states;
            for (const auto org : in_scope) {
                for (const auto& s : store::kJobStates) {
                    const std::string state(s.name);
                    const auto e = estimate_of(org, state);
                    // A finished state's count only grows: an estimate errs low, never showing
                    // work that is gone.
                    const bool growing = store::is_terminal(s.state);
                    if (growing && e >= sql::kSkipCountFactor * sql::kExactCountCap) {
                        by_org[org]["counts"][state] = e;
                        by_org[org]["estimated"][state] = true;
                        continue;
                    }
                    count_orgs.push_back(org);
                    count_states.push_back(state);
                }
            }
            // An operator of every organization reads the aggregates as the login role: the
            // policy would let every row through, at several times the cost per row of the
            // scans below. Scoped operators read them under the policy, as everything else.
            if (op.orgs) scope(s);
            pqxx::read_transaction txn(op.orgs ? data() : meta());
            for (const auto& r :
                 txn.exec_params(sql::kCappedCounts, store::pg_array(count_orgs),
                                 store::pg_array(count_states), sql::kExactCountCap)) {
                const auto org = r["org_id"].as<store::OrgId>();
                const auto state = r["state"].as<std::string>();
                const auto n = r["n"].as<long long>();
                by_org[org]["counts"][state] = n;
                if (n <= sql::kExactCountCap) continue;
                if (const auto e = estimate_of(org, state); e >= 0) {
                    by_org[org]["counts"][state] = std::max(sql::kExactCountCap, e);
                    by_org[org]["estimated"][state] = true;
                } else {
                    to_estimate.emplace_back(org, state);
                }
            }
            for (const auto& r : txn.exec_params(sql::kLeaseCounts, now)) {
                const auto org = r["org_id"].as<store::OrgId>();
                if (!by_org.count(org)) continue;
                by_org[org]["leases_out"] = r["leases_out"].as<long long>();
                by_org[org]["leases_expired"] = r["leases_expired"].as<long long>();
            }
            queue_overview(txn, in_scope, now, by_org);
            for (const auto& r :
                 txn.exec_params(sql::kConnectedWorkers, now, store::pg_array(in_scope))) {
                const auto org = r["org_id"].as<store::OrgId>();
                if (!by_org.count(org)) continue;
                by_org[org]["coordinators"].push_back(
                    {{"coordinator", r["coordinator"].as<std::string>()},
                     {"endpoint", r["endpoint"].as<std::string>()},
                     {"workers", r["workers"].as<int>()},
                     {"seen_ms_ago", age_ms(now, r["seen_us"].as<base::Micros>())}});
            }
            for (const auto& r : txn.exec_params(sql::kCompletionsPerMinute, since, now,
                                                 store::pg_array(in_scope))) {
                const auto org = r["org_id"].as<store::OrgId>();
                const auto minute = static_cast<int>(
                    (r["bin_us"].as<base::Micros>() - base::to_micros(since)) / 60'000'000);
                if (!by_org.count(org) || minute < 0 || minute >= kMinutesCharted) continue;
                by_org[org]["completions_per_minute"][minute] = r["n"].as<long long>();
            }
            for (const auto& r : txn.exec_params(sql::kRejections, since)) {
                const auto org = r["org_id"].as<store::OrgId>();
                if (!by_org.count(org)) continue;
                by_org[org]["rejections"][r["reason"].as<std::string>()] = r["n"].as<long long>();
            }
        }
        if (!to_estimate.empty()) {
            // A pair the statistics do not list among the most common: the planner's estimate,
            // asked as the login role (under row-level security the policy's filter would
            // distort it).
            pqxx::nontransaction txn(meta());
            for (const auto& [org, state] : to_estimate) {
                const auto plan = json::parse(
                    txn.exec1(sql::state_count_plan(org, txn.quote(state)))[0].as<std::string>());
                const auto rows = plan.at(0).at("Plan").at("Plan Rows").get<double>();
                by_org[org]["counts"][state] =
                    std::max<long long>(sql::kExactCountCap, static_cast<long long>(rows));
                by_org[org]["estimated"][state] = true;
            }
        }
        // Per organization and in total: the completion rate over the last minute and the time
        // the pending jobs take at it (pending may be the planner's estimate: `estimated`).
        ops::DrainRate total;
        bool total_estimated = false;
        for (auto& [org, o] : by_org) {
            const ops::DrainRate rate{o["counts"]["pending"].get<std::int64_t>(),
                                      o["completed_last_minute"].get<std::int64_t>()};
            o["drain"] = ops::drain_json(rate);
            o["drain"]["estimated"] = o["estimated"]["pending"];
            total_estimated = total_estimated || o["estimated"]["pending"].get<bool>();
            total += rate;
        }
        json out = {{"now_us", base::to_micros(now)},
                    {"exact_count_cap", sql::kExactCountCap},
                    {"drain", ops::drain_json(total)},
                    {"organizations", json::array()}};
        out["drain"]["estimated"] = total_estimated;
        for (auto& [org, o] : by_org) out["organizations"].push_back(std::move(o));
        return out;
    });
}

}  // namespace aclaim::console
