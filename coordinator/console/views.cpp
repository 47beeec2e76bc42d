#include "coordinator/console/views.hpp"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>

#include "common/ops/checker.hpp"
#include "common/ops/operator_store.hpp"
#include "common/ops/recovery.hpp"
#include "common/ops/recovery_store.hpp"
#include "common/store/migrations.hpp"
#include "common/store/pg_array.hpp"
#include "common/store/pg_time.hpp"
#include "common/store/store_sql.hpp"
#include "coordinator/console/console_sql.hpp"
#include "coordinator/ctl/job_json.hpp"

namespace aclaim::console {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int kMinutesCharted = 60;
constexpr int kLeasesShown = 500;

json micros_or_null(const pqxx::field& f) {
    return f.is_null() ? json(nullptr) : json(f.as<common::Micros>());
}

std::string actor_of(const Operator& op) {
    return "console:" + op.name;
}

}  // namespace

Views::Views(std::string dsn, fs::path reports_dir)
    : dsn_(std::move(dsn)), reports_dir_(std::move(reports_dir)) {}

template <typename F>
auto Views::with_connections(F&& f) -> decltype(f()) {
    std::lock_guard lock(mutex_);
    try {
        return f();
    } catch (const pqxx::broken_connection&) {
        // Reconnect on the next request rather than serve from a dead connection forever.
        data_.reset();
        meta_.reset();
        throw;
    }
}

pqxx::connection& Views::data() {
    if (!data_) {
        data_ = std::make_unique<pqxx::connection>(dsn_);
        pqxx::nontransaction session(*data_);
        session.exec(std::string("SET ROLE ") + common::sql::kRowSecurityRole);
    }
    return *data_;
}

pqxx::connection& Views::meta() {
    if (!meta_) meta_ = std::make_unique<pqxx::connection>(dsn_);
    return *meta_;
}

void Views::scope(const std::string& org_or_system) {
    // Session-wide (not SET LOCAL), so that it covers the stores' own transactions too; every use
    // sets it first, under the mutex.
    pqxx::nontransaction session(data());
    session.exec_params("SELECT set_config('aclaim.org_id', $1, false)", org_or_system);
}

std::vector<std::string> Views::scopes_of(const Operator& op) {
    if (!op.orgs) return {common::sql::kAllOrganizations};
    std::vector<std::string> out;
    for (const auto org : *op.orgs) out.push_back(std::to_string(org));
    return out;
}

void Views::migrate() {
    with_connections([&] { common::migrate(meta()); });
}

std::optional<Operator> Views::authenticate(const Credentials& who) {
    return with_connections([&] { return console::authenticate(meta(), who); });
}

json Views::overview(const Operator& op, common::Instant now) {
    return with_connections([&] {
        const auto since = now - std::chrono::minutes(kMinutesCharted);
        std::vector<common::OrgId> orgs;
        if (op.orgs) {
            orgs = *op.orgs;
        } else {
            pqxx::read_transaction txn(meta());
            for (const auto& r : txn.exec(sql::kOrganizations))
                orgs.push_back(r[0].as<common::OrgId>());
        }
        std::map<common::OrgId, json> by_org;
        for (const auto org : orgs) {
            json counts = json::object();
            json estimated = json::object();
            for (const auto s : sql::kStates) {
                counts[std::string(s)] = 0;
                estimated[std::string(s)] = false;
            }
            by_org[org] = {{"org_id", org},
                           {"counts", counts},
                           {"estimated", estimated},
                           {"leases_out", 0},
                           {"leases_expired", 0},
                           {"oldest_pending_age_ms", nullptr},
                           {"completions_per_minute", std::vector<long long>(kMinutesCharted, 0)},
                           {"rejections", json::object()}};
        }
        // The planner's estimates, read as the login role (the statistics are the owner's):
        // growing states far above the cap are not counted at all.
        std::map<std::pair<common::OrgId, std::string>, long long> estimates;
        {
            pqxx::read_transaction txn(meta());
            for (const auto& r : txn.exec(sql::kStateEstimates)) {
                estimates[{r["org_id"].as<common::OrgId>(), r["state"].as<std::string>()}] =
                    r["estimate"].as<long long>();
            }
        }
        auto estimate_of = [&](common::OrgId org, const std::string& state) -> long long {
            const auto it = estimates.find({org, state});
            return it == estimates.end() ? -1 : it->second;
        };
        std::vector<std::pair<common::OrgId, std::string>> to_estimate;
        for (const auto& s : scopes_of(op)) {
            std::vector<common::OrgId> in_scope;
            if (op.orgs) {
                in_scope = {std::stoll(s)};
            } else {
                in_scope = orgs;
            }
            std::vector<common::OrgId> count_orgs;
            std::vector<std::string> count_states;
            for (const auto org : in_scope) {
                for (const auto state_view : sql::kStates) {
                    const std::string state(state_view);
                    const auto e = estimate_of(org, state);
                    const bool growing =
                        std::find(sql::kGrowingStates.begin(), sql::kGrowingStates.end(),
                                  state_view) != sql::kGrowingStates.end();
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
                 txn.exec_params(sql::kCappedCounts, common::pg_array(count_orgs),
                                 common::pg_array(count_states), sql::kExactCountCap)) {
                const auto org = r["org_id"].as<common::OrgId>();
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
                const auto org = r["org_id"].as<common::OrgId>();
                if (!by_org.count(org)) continue;
                by_org[org]["leases_out"] = r["leases_out"].as<long long>();
                by_org[org]["leases_expired"] = r["leases_expired"].as<long long>();
            }
            for (const auto& r : txn.exec_params(sql::kOldestPending, common::pg_array(in_scope))) {
                by_org[r["org_id"].as<common::OrgId>()]["oldest_pending_age_ms"] =
                    r["oldest_pending_us"].is_null()
                        ? json(nullptr)
                        : json((common::to_micros(now) -
                                r["oldest_pending_us"].as<common::Micros>()) /
                               1000);
            }
            for (const auto& r : txn.exec_params(sql::kCompletionsPerMinute, since, now,
                                                 common::pg_array(in_scope))) {
                const auto org = r["org_id"].as<common::OrgId>();
                const auto minute = static_cast<int>(
                    (r["bin_us"].as<common::Micros>() - common::to_micros(since)) / 60'000'000);
                if (!by_org.count(org) || minute < 0 || minute >= kMinutesCharted) continue;
                by_org[org]["completions_per_minute"][minute] = r["n"].as<long long>();
            }
            for (const auto& r : txn.exec_params(sql::kRejections, since)) {
                const auto org = r["org_id"].as<common::OrgId>();
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
                    txn.exec1("EXPLAIN (FORMAT JSON) SELECT 1 FROM jobs WHERE org_id = " +
                              std::to_string(org) + " AND state = " + txn.quote(state))[0]
                        .as<std::string>());
                const auto rows = plan.at(0).at("Plan").at("Plan Rows").get<double>();
                by_org[org]["counts"][state] =
                    std::max<long long>(sql::kExactCountCap, static_cast<long long>(rows));
                by_org[org]["estimated"][state] = true;
            }
        }
        json out = {{"now_us", common::to_micros(now)},
                    {"exact_count_cap", sql::kExactCountCap},
                    {"organizations", json::array()}};
        for (auto& [org, o] : by_org) out["organizations"].push_back(std::move(o));
        return out;
    });
}

json Views::leases(const Operator& op, common::Instant now) {
    return with_connections([&] {
        json rows = json::array();
        for (const auto& s : scopes_of(op)) {
            scope(s);
            pqxx::read_transaction txn(data());
            for (const auto& r : txn.exec_params(sql::kLeases, kLeasesShown)) {
                const auto lease = r["lease_us"].as<common::Micros>();
                rows.push_back({{"id", r["id"].as<common::JobId>()},
                                {"org_id", r["org_id"].as<common::OrgId>()},
                                {"generation", r["generation"].as<common::Generation>()},
                                {"holder", r["assignee"].as<std::string>()},
                                {"attempts", r["attempts"].as<int>()},
                                {"max_attempts", r["max_attempts"].as<int>()},
                                {"claimed_us", micros_or_null(r["claimed_us"])},
                                {"lease_us", lease},
                                {"renewed_us", micros_or_null(r["renewed_us"])},
                                {"time_left_ms", (lease - common::to_micros(now)) / 1000}});
            }
        }
        std::sort(rows.begin(), rows.end(), [](const json& a, const json& b) {
            return a["lease_us"].get<common::Micros>() < b["lease_us"].get<common::Micros>();
        });
        return json{{"now_us", common::to_micros(now)}, {"leases", rows}};
    });
}

json Views::jobs(const Operator& op, const JobQuery& q) {
    return with_connections([&] {
        std::vector<common::JobRecord> found;
        for (const auto& s : scopes_of(op)) {
            if (q.org && op.orgs && std::to_string(*q.org) != s) continue;
            scope(s);
            common::JobFilter f;
            f.org_id = q.org;
            f.state = q.state;
            f.assignee = q.holder;
            f.enqueued_before = q.enqueued_before;
            f.after_id = q.after_id;
            f.limit = q.limit + 1;
            auto page = common::OperatorStore(data()).list(f);
            found.insert(found.end(), page.begin(), page.end());
        }
        // Several scopes each return their first page; the merged page is their first ids.
        std::sort(found.begin(), found.end(),
                  [](const auto& a, const auto& b) { return a.id < b.id; });
        const bool more = static_cast<int>(found.size()) > q.limit;
        if (more) found.resize(static_cast<std::size_t>(q.limit));
        json rows = json::array();
        for (auto& j : found) {
            j.payload.reset();
            rows.push_back(ctl::job_json(j));
        }
        return json{{"jobs", rows}, {"next_after", more ? json(found.back().id) : json(nullptr)}};
    });
}

std::optional<json> Views::job(const Operator& op, common::JobId id, common::Instant now) {
    return with_connections([&]() -> std::optional<json> {
        for (const auto& s : scopes_of(op)) {
            scope(s);
            const auto d = common::RecoveryStore(data()).dossier(id, now);
            if (!d) continue;
            const auto& snap = d->snapshot;
            json events = json::array();
            for (const auto& e : d->events) events.push_back(ctl::event_json(e));
            json result = nullptr;
            if (snap.result) {
                result = {{"generation", snap.result->generation},
                          {"result_ref", snap.result->result_ref},
                          {"published_at", common::format_instant(snap.result->published_at)}};
            }
            auto row = ctl::job_json(snap.row);
            // The dossier leaves payloads in the table; one job's page shows its own.
            if (const auto full = common::OperatorStore(data()).job(id)) {
                row["payload"] = full->payload ? json(*full->payload) : json(nullptr);
            }
            return json{{"job", row},
                        {"class", common::to_string(snap.classification.cls)},
                        {"findings", snap.classification.explanation()},
                        {"result", result},
                        {"events", events}};
        }
        return std::nullopt;
    });
}

json Views::quarantine(const Operator& op) {
    return with_connections([&] {
        json rows = json::array();
        for (const auto& s : scopes_of(op)) {
            scope(s);
            for (auto& j : common::RecoveryStore(data()).quarantined()) {
                j.payload.reset();
                rows.push_back(ctl::job_json(j));
            }
        }
        return json{{"quarantined", rows}};
    });
}

ActionResult Views::resolve_quarantined(const Operator& op, common::JobId id, bool release,
                                        const std::string& reason, common::Instant now) {
    return with_connections([&] {
        for (const auto& s : scopes_of(op)) {
            scope(s);
            if (!common::OperatorStore(data()).job(id)) continue;
            common::RecoveryStore store(data());
            const auto r = release ? store.release(id, reason, actor_of(op), now)
                                   : store.fail(id, reason, actor_of(op), now);
            if (r.refusal)
                return ActionResult{ActionResult::Kind::Refused, {{"error", *r.refusal}}};
            return ActionResult{ActionResult::Kind::Done,
                                {{"job_id", id},
                                 {"state", common::to_string(r.state)},
                                 {"generation", r.generation},
                                 {"by", actor_of(op)}}};
        }
        return ActionResult{ActionResult::Kind::NotFound, {{"error", "no such job"}}};
    });
}

ActionResult Views::resolve_lease(const Operator& op, common::JobId id, common::Generation seen,
                                  bool release, const std::string& reason, common::Instant now) {
    return with_connections([&] {
        using Result = common::OperatorOutcome::Result;
        for (const auto& s : scopes_of(op)) {
            scope(s);
            common::OperatorStore store(data());
            const auto r = release ? store.release(id, seen, actor_of(op), reason, now)
                                   : store.fail(id, seen, actor_of(op), reason, now);
            switch (r.result) {
                case Result::NotFound:
                    continue;  // not in this organization: try the operator's next one
                case Result::Done:
                    return ActionResult{ActionResult::Kind::Done,
                                        {{"job_id", id},
                                         {"state", common::to_string(r.job->state)},
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

std::vector<fs::path> Views::report_files() const {
    std::vector<std::pair<fs::file_time_type, fs::path>> found;
    std::error_code ec;
    if (reports_dir_.empty() || !fs::is_directory(reports_dir_, ec)) return {};
    constexpr int kMaxDepth = 2;
    for (auto it = fs::recursive_directory_iterator(
             reports_dir_, fs::directory_options::skip_permission_denied, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        if (it.depth() >= kMaxDepth) it.disable_recursion_pending();
        if (!it->is_regular_file(ec)) continue;
        const auto ext = it->path().extension();
        if (ext != ".json" && ext != ".svg") continue;
        found.emplace_back(it->last_write_time(ec), it->path().lexically_relative(reports_dir_));
    }
    std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
        return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    constexpr std::size_t kMaxReports = 200;
    std::vector<fs::path> out;
    for (std::size_t i = 0; i < found.size() && i < kMaxReports; ++i)
        out.push_back(found[i].second);
    return out;
}

json Views::drills() {
    json files = json::array();
    for (const auto& p : report_files()) {
        std::error_code ec;
        files.push_back({{"path", p.generic_string()},
                         {"kind", p.extension() == ".svg" ? "svg" : "json"},
                         {"bytes", fs::file_size(reports_dir_ / p, ec)}});
    }
    std::lock_guard lock(mutex_);
    return json{{"reports", files}, {"last_check", last_check_}};
}

std::optional<std::string> Views::report(const std::string& relative) {
    // Served only when it is one of the listed files: no path the client makes up is opened.
    for (const auto& p : report_files()) {
        if (p.generic_string() != relative) continue;
        std::ifstream in(reports_dir_ / p, std::ios::binary);
        return std::string(std::istreambuf_iterator<char>(in), {});
    }
    return std::nullopt;
}

std::optional<json> Views::run_check(const Operator& op, common::Instant now) {
    if (op.orgs) return std::nullopt;
    return with_connections([&] {
        scope(common::sql::kAllOrganizations);
        const auto report = common::check(common::load_history(data()));
        json violations = json::array();
        for (const auto& v : report.violations) {
            violations.push_back({{"invariant", common::to_string(v.invariant)},
                                  {"job_id", v.job_id},
                                  {"evidence", v.evidence}});
        }
        last_check_ = {{"at", common::format_instant(now)},
                       {"by", actor_of(op)},
                       {"ok", report.ok()},
                       {"jobs", report.jobs},
                       {"events", report.events},
                       {"states", report.states},
                       {"accepted_completions", report.accepted_completions},
                       {"rejections", report.rejections},
                       {"reclaims", report.reclaims},
                       {"violations", violations}};
        return std::optional<json>(last_check_);
    });
}

}  // namespace aclaim::console
