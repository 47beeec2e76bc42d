#include "console/views.hpp"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

#include "common/ops/checker.hpp"
#include "common/ops/job_json.hpp"
#include "common/ops/operator_store.hpp"
#include "common/ops/recovery.hpp"
#include "common/ops/recovery_store.hpp"
#include "common/store/pg_array.hpp"
#include "common/store/pg_time.hpp"
#include "common/store/session_sql.hpp"
#include "common/store/store_sql.hpp"
#include "console/console_sql.hpp"

namespace aclaim::console {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int kLeasesShown = 500;
const base::SystemClock kSystemClock;

json micros_or_null(const pqxx::field& f) {
    return f.is_null() ? json(nullptr) : json(f.as<base::Micros>());
}

}  // namespace

Views::Views(std::string dsn, fs::path reports_dir, const base::Clock& clock,
             std::optional<base::Duration> turn_wait)
    : dsn_(std::move(dsn)),
      reports_dir_(std::move(reports_dir)),
      clock_(clock),
      turn_wait_(turn_wait) {}

Views::Views(std::string dsn, fs::path reports_dir)
    : Views(std::move(dsn), std::move(reports_dir), kSystemClock) {}

namespace {

/// sql::kSession says why.
void console_session(pqxx::connection& conn) {
    pqxx::nontransaction session(conn);
    session.exec(sql::kSession);
}

}  // namespace

pqxx::connection& Views::data() {
    if (!data_) {
        data_ = std::make_unique<pqxx::connection>(dsn_);
        console_session(*data_);
        pqxx::nontransaction session(*data_);
        session.exec(store::sql::kActAsRowSecurityRole.text);
    }
    return *data_;
}

pqxx::connection& Views::meta() {
    if (!meta_) {
        meta_ = std::make_unique<pqxx::connection>(dsn_);
        console_session(*meta_);
    }
    return *meta_;
}

void Views::scope(const std::string& org_or_system) {
    // Session-wide (not SET LOCAL), so that it covers the stores' own transactions too; every use
    // sets it first, under the mutex.
    pqxx::nontransaction session(data());
    session.exec_params(sql::kSessionScope, org_or_system);
}

std::vector<std::string> Views::scopes_of(const Operator& op) {
    if (!op.orgs) return {store::sql::kAllOrganizations};
    std::vector<std::string> out;
    for (const auto org : *op.orgs) out.push_back(std::to_string(org));
    return out;
}

std::optional<Operator> Views::authenticate(const Credentials& who) {
    const auto login = with_connections([&] { return find_login(meta(), who.name); });
    struct Slot {
        explicit Slot(std::counting_semaphore<>& s) : slots(s) { slots.acquire(); }
        ~Slot() { slots.release(); }
        Slot(const Slot&) = delete;
        Slot& operator=(const Slot&) = delete;
        std::counting_semaphore<>& slots;
    } slot(hash_slots_);
    return check_login(login, who.password, password_check_);
}

json Views::leases(const Operator& op, base::Instant now) {
    return with_connections([&] {
        json rows = json::array();
        for (const auto& s : scopes_of(op)) {
            scope(s);
            pqxx::read_transaction txn(data());
            for (const auto& r : txn.exec_params(sql::kLeases, kLeasesShown)) {
                const auto lease = r["lease_us"].as<base::Micros>();
                rows.push_back({{"id", r["id"].as<store::JobId>()},
                                {"org_id", r["org_id"].as<store::OrgId>()},
                                {"generation", r["generation"].as<store::Generation>()},
                                {"holder", r["assignee"].as<std::string>()},
                                {"attempts", r["attempts"].as<int>()},
                                {"max_attempts", r["max_attempts"].as<int>()},
                                {"claimed_us", micros_or_null(r["claimed_us"])},
                                {"lease_us", lease},
                                {"renewed_us", micros_or_null(r["renewed_us"])},
                                {"time_left_ms", (lease - base::to_micros(now)) / 1000}});
            }
        }
        std::sort(rows.begin(), rows.end(), [](const json& a, const json& b) {
            return a["lease_us"].get<base::Micros>() < b["lease_us"].get<base::Micros>();
        });
        return json{{"now_us", base::to_micros(now)}, {"leases", rows}};
    });
}

json Views::jobs(const Operator& op, const ops::JobFilter& q) {
    return with_connections([&] {
        std::vector<ops::JobRecord> found;
        for (const auto& s : scopes_of(op)) {
            if (q.org_id && op.orgs && std::to_string(*q.org_id) != s) continue;
            scope(s);
            // One row past the page says whether there is a next one.
            ops::JobFilter f = q;
            f.limit = q.limit + 1;
            auto page = ops::OperatorStore(data()).list(f);
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
            rows.push_back(ops::job_json(j));
        }
        return json{{"jobs", rows}, {"next_after", more ? json(found.back().id) : json(nullptr)}};
    });
}

json Views::exclusions_of(store::JobId id, const std::string& queue, bool pending,
                          base::Instant now) {
    pqxx::read_transaction txn(data());
    const auto listed = ops::exclusions_json(ops::read_exclusions(txn, id));
    const auto& reviewers = listed["reviewers"];
    const auto& completers_of = listed["completers_of"];
    if (reviewers.empty() && completers_of.empty()) return nullptr;
    json connected = json::array();
    std::vector<std::string> excluded;
    long long unknown = 0;
    for (const auto& r : txn.exec_params(sql::kConnectedReviewers, id, base::to_micros(now))) {
        if (r["name"].is_null()) {
            unknown = r["unknown"].as<long long>();
            continue;
        }
        const auto name = r["name"].as<std::string>();
        const bool out = r["excluded"].as<bool>();
        connected.push_back({{"name", name}, {"excluded", out}});
        if (out) excluded.push_back(name);
    }
    // Why a pending job waits: every reviewer connected now that serves its queue is one it
    // excludes (a reviewer of other queues would not take it if it could).
    json waits = nullptr;
    if (pending && unknown == 0 && !connected.empty() && excluded.size() == connected.size()) {
        std::string names;
        for (const auto& n : excluded) names += (names.empty() ? "" : ", ") + n;
        waits = "every connected reviewer of queue " + queue + " (" + names +
                ") is excluded from this job";
    } else if (pending && unknown == 0 && connected.empty()) {
        waits = "no reviewer of queue " + queue + " is connected";
    }
    return {{"reviewers", reviewers},
            {"completers_of", completers_of},
            {"connected", connected},
            {"connected_unnamed", unknown},
            {"waits_because", waits}};
}

std::optional<json> Views::job(const Operator& op, store::JobId id, base::Instant now) {
    return with_connections([&]() -> std::optional<json> {
        for (const auto& s : scopes_of(op)) {
            scope(s);
            const auto d = ops::RecoveryStore(data()).dossier(id, now);
            if (!d) continue;
            const auto& snap = d->snapshot;
            json events = json::array();
            for (const auto& e : d->events) events.push_back(ops::event_json(e));
            json result = nullptr;
            if (snap.result) {
                result = {{"generation", snap.result->generation},
                          {"result_ref", snap.result->result_ref},
                          {"published_at", ops::format_instant(snap.result->published_at)}};
            }
            auto row = ops::job_json(snap.row);
            ops::OperatorStore store(data());
            // The dossier leaves payloads in the table; one job's page shows its own.
            if (const auto full = store.job(id)) {
                row["payload"] = full->payload ? json(*full->payload) : json(nullptr);
            }
            const auto progress = store.progress(id);
            const auto park = store.park(id);
            json exclusions =
                exclusions_of(id, snap.row.queue, snap.row.state == store::JobState::Pending, now);
            return json{{"job", row},
                        {"exclusions", exclusions},
                        {"progress", progress ? ops::progress_json(*progress) : json(nullptr)},
                        {"park", park ? ops::park_json(*park) : json(nullptr)},
                        {"class", ops::to_string(snap.classification.cls)},
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
            for (auto& j : ops::RecoveryStore(data()).quarantined()) {
                j.payload.reset();
                rows.push_back(ops::job_json(j));
            }
        }
        return json{{"quarantined", rows}};
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

json Views::drills(const Operator& op) {
    if (op.orgs) return json{{"reports", json::array()}, {"last_check", scoped_check(op)}};
    json files = json::array();
    for (const auto& p : report_files()) {
        std::error_code ec;
        files.push_back({{"path", p.generic_string()},
                         {"kind", p.extension() == ".svg" ? "svg" : "json"},
                         {"bytes", fs::file_size(reports_dir_ / p, ec)}});
    }
    return turn_.run(turn_wait_, [&] {
        return json{{"reports", files}, {"last_check", last_check_}};
    });
}

json Views::scoped_check(const Operator& op) {
    return with_connections([&]() -> json {
        if (last_check_.is_null()) return nullptr;
        std::vector<store::JobId> ids;
        for (const auto& v : last_check_["violations"])
            ids.push_back(v["job_id"].get<store::JobId>());
        // The violations' jobs this operator may read, asked under row-level security in each of
        // its organizations: a job gone since (pruned) or of another organization is not shown.
        std::set<store::JobId> visible;
        if (!ids.empty()) {
            for (const auto& s : scopes_of(op)) {
                scope(s);
                pqxx::read_transaction txn(data());
                for (const auto& r : txn.exec_params(sql::kVisibleJobs, store::pg_array(ids)))
                    visible.insert(r[0].as<store::JobId>());
            }
        }
        json violations = json::array();
        for (const auto& v : last_check_["violations"]) {
            if (visible.count(v["job_id"].get<store::JobId>())) violations.push_back(v);
        }
        return json{{"scoped", true},
                    {"ok", violations.empty()},
                    {"violations", violations},
                    {"at", last_check_["at"]},
                    {"by", last_check_["by"]}};
    });
}

std::optional<std::string> Views::report(const Operator& op, const std::string& relative) {
    if (op.orgs) return std::nullopt;
    // Served only when it is one of the listed files: no path the client makes up is opened.
    for (const auto& p : report_files()) {
        if (p.generic_string() != relative) continue;
        std::ifstream in(reports_dir_ / p, std::ios::binary);
        return std::string(std::istreambuf_iterator<char>(in), {});
    }
    return std::nullopt;
}

std::optional<json> Views::run_check(const Operator& op, base::Instant now) {
    if (op.orgs) return std::nullopt;
    return with_connections([&] {
        scope(store::sql::kAllOrganizations);
        const auto report = ops::check(ops::load_history(data()));
        last_check_ = ops::check_report_json(report);
        last_check_["at"] = ops::format_instant(now);
        last_check_["by"] = actor_of(op);
        return std::optional<json>(last_check_);
    });
}

}  // namespace aclaim::console
