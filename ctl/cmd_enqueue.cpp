// enqueue: jobs from arguments, from a CSV file or from JSON lines, written in batches.

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <utility>

#include "common/base/clock.hpp"
#include "common/ops/operator_sql.hpp"
#include "common/ops/operator_store.hpp"
#include "common/ops/recovery.hpp"
#include "common/store/assignment_store.hpp"
#include "ctl/ctl.hpp"
#include "ctl/job_records.hpp"
#include "ctl/progress.hpp"
#include "ctl/terminal.hpp"

namespace aclaim::ctl {

namespace {

struct EnqueueArgs {
    std::int64_t org = 0;
    int count = 0;
    int priority = 0;
    std::optional<int> max_attempts;
    std::string queue{base::kDefaultQueue};
    std::string delay;
    std::string run_at;
    std::string backoff_base;
    std::string backoff_cap;
    std::string run_timeout;
    std::string dedupe_key;
    std::string dedupe_window;
    std::string depends_on;
    std::string on_failure = "cancel";
    std::string exclude_keys;
    std::string exclude_completers_of;
    std::string payload = "review";
    std::vector<std::string> payloads;
    std::string csv;
    std::string jsonl;
    int batch = 1000;
    bool ids_only = false;
    bool allow_past = false;
    bool new_queue = false;
};

/// How far in the past a run time may lie and still be taken for "now": a script that writes
/// `date -u +%FT%TZ` loses the fraction of a second, and clocks differ by a little.
constexpr auto kRunAtSlack = std::chrono::seconds(60);

std::optional<base::Duration> duration_option(const std::string& text, const char* flag) {
    if (text.empty()) return std::nullopt;
    const auto d = parse_duration(text);
    if (!d)
        throw UsageError(std::string(flag) + " '" + text + "' is not a duration like 30s or 5m");
    return d;
}

/// The comma-separated items of `text` (none when it is empty), each non-empty.
std::vector<std::string> comma_items(const std::string& text, const char* flag) {
    std::vector<std::string> out;
    for (std::size_t at = 0; !text.empty() && at <= text.size();) {
        const auto comma = std::min(text.find(',', at), text.size());
        out.push_back(text.substr(at, comma - at));
        if (out.back().empty())
            throw UsageError(std::string(flag) +
                             " takes items separated by commas, and one is "
                             "empty");
        at = comma + 1;
    }
    return out;
}

/// The job ids of a comma-separated list.
std::vector<store::JobId> job_ids(const std::string& text, const char* flag) {
    std::vector<store::JobId> out;
    for (const auto& item : comma_items(text, flag)) {
        char* end = nullptr;
        const long long id = std::strtoll(item.c_str(), &end, 10);
        if (*end != '\0' || id <= 0)
            throw UsageError(std::string(flag) + " takes job ids separated by commas, and '" +
                             item + "' is not one");
        out.push_back(id);
    }
    return out;
}

/// The lifecycle options (queue, schedule, retry policy, deadline, dedupe key) applied to every
/// record, checked before anything is written.
void apply_lifecycle(const EnqueueArgs& a, std::vector<EnqueueRecord>& records, base::Instant now) {
    if (!base::valid_queue_name(a.queue))
        throw UsageError("--queue '" + a.queue +
                         "' is not a queue name: 1..64 of A-Z a-z 0-9 _ . : -, starting with a "
                         "letter or digit");
    std::optional<base::Instant> run_at;
    if (!a.run_at.empty()) {
        run_at = ops::parse_instant(a.run_at);
        if (!run_at) throw UsageError("--run-at '" + a.run_at + "' is not an ISO 8601 instant");
        if (*run_at < now - kRunAtSlack && !a.allow_past) {
            throw UsageError("--run-at " + a.run_at + " is in the past (it is " +
                             ops::format_instant(now) +
                             "): the job would be claimable at once; pass --allow-past if that "
                             "is meant, or --delay for a time from now");
        }
    }
    if (const auto delay = duration_option(a.delay, "--delay")) {
        if (run_at) throw UsageError("give --delay or --run-at, not both");
        run_at = now + *delay;
    }
    if (!a.dedupe_key.empty() && records.size() != 1)
        throw UsageError("--dedupe-key names one job; give keys per record in --jsonl instead");
    const auto base = duration_option(a.backoff_base, "--backoff-base");
    const auto cap = duration_option(a.backoff_cap, "--backoff-cap");
    const auto timeout = duration_option(a.run_timeout, "--run-timeout");
    if (base && cap && *cap < *base) throw UsageError("--backoff-cap is below --backoff-base");
    const auto depends_on = job_ids(a.depends_on, "--depends-on");
    const auto exclude_keys = comma_items(a.exclude_keys, "--exclude-keys");
    const auto exclude_completers_of = job_ids(a.exclude_completers_of, "--exclude-completers-of");

    // A flag fills what a record (--csv, --jsonl) leaves out: a record is the more specific.
    for (auto& r : records) {
        if (!r.has_depends_on) r.job.depends_on = depends_on;
        if (!r.has_exclude_keys) r.job.exclude_keys = exclude_keys;
        if (!r.has_exclude_completers_of) r.job.exclude_completers_of = exclude_completers_of;
        if (!r.has_on_failure)
            r.job.on_failure = a.on_failure == "run" ? store::DependencyPolicy::Run
                                                     : store::DependencyPolicy::Cancel;
        if (!r.has_queue) r.job.queue = a.queue;
        if (!r.has_run_at) {
            r.job.run_at = run_at;
        } else if (*r.job.run_at < now - kRunAtSlack && !a.allow_past) {
            throw UsageError("record at line " + std::to_string(r.line) + ": run_at " +
                             ops::format_instant(*r.job.run_at) + " is in the past (it is " +
                             ops::format_instant(now) + "); pass --allow-past if that is meant");
        }
        r.job.backoff_base = base;
        r.job.backoff_cap = cap;
        r.job.run_timeout = timeout;
        if (!a.dedupe_key.empty()) r.job.dedupe_key = a.dedupe_key;
    }
}

/// Refuses a queue the organization does not know (no settings, no job; `default` always is),
/// with the ones it has, as `queue set` does: a misspelt --queue would make jobs no worker
/// serves. --new-queue creates jobs in a queue nobody configured yet on purpose.
void require_known_queues(const Global& global, const EnqueueArgs& a,
                          const std::vector<EnqueueRecord>& records) {
    if (a.new_queue) return;
    std::set<std::pair<store::OrgId, std::string>> asked;
    for (const auto& r : records) {
        if (r.job.queue != base::kDefaultQueue) asked.emplace(r.org_id, r.job.queue);
    }
    if (asked.empty()) return;
    pqxx::connection conn(require_dsn(global));
    pqxx::read_transaction txn(conn);
    for (const auto& [org, queue] : asked) {
        if (txn.exec_params1(ops::sql::kOperatorQueueKnown.text, org, queue)[0].as<bool>())
            continue;
        std::set<std::string> known{std::string(base::kDefaultQueue)};
        for (const auto& row : txn.exec_params(ops::sql::kOperatorQueueNames.text, org))
            known.insert(row[0].as<std::string>());
        std::string list;
        for (const auto& q : known) list += (list.empty() ? "" : ", ") + q;
        throw UsageError(std::string(ops::UnknownQueue(org, queue).what()) + "; its queues: " +
                         list + ". Add --new-queue if jobs in a new queue are meant");
    }
}

/// The records the arguments describe, read and checked in full before anything is written.
std::vector<EnqueueRecord> gather(const EnqueueArgs& a) {
    const RecordDefaults defaults{a.org, a.priority, a.max_attempts};
    const std::string& file = a.csv.empty() ? a.jsonl : a.csv;
    if (!file.empty()) {
        if (a.count > 0 || !a.payloads.empty()) {
            throw UsageError(
                "give jobs either as arguments (--count or payloads) or from a file, "
                "not both");
        }
        const bool csv = !a.csv.empty();
        const std::string source = file == "-" ? "<stdin>" : file;
        std::ifstream stream;
        if (file != "-") {
            stream.open(file, std::ios::binary);
            if (!stream) throw UsageError("cannot open " + file + ": " + std::strerror(errno));
        }
        std::istream& in = file == "-" ? std::cin : stream;
        auto records = csv ? read_csv(in, source, defaults) : read_jsonl(in, source, defaults);
        if (records.empty()) throw UsageError(source + " holds no jobs");
        return records;
    }
    if (a.org <= 0)
        throw UsageError("--org is required unless the jobs come from --csv or --jsonl");
    if (a.count > 0 && !a.payloads.empty()) {
        throw UsageError("give either --count (numbered synthetic payloads) or payloads, not both");
    }
    std::vector<EnqueueRecord> records;
    if (!a.payloads.empty()) {
        for (std::size_t i = 0; i < a.payloads.size(); ++i) {
            records.push_back({a.org, {a.priority, a.payloads[i], a.max_attempts}, i + 1});
        }
    } else {
        const int n = a.count > 0 ? a.count : 1;
        records.reserve(static_cast<std::size_t>(n));
        for (int i = 0; i < n; ++i) {
            records.push_back({a.org,
                               {a.priority, a.payload + "-" + std::to_string(i), a.max_attempts},
                               static_cast<std::size_t>(i) + 1});
        }
    }
    return records;
}

/// The first line of the server's refusal without its "ERROR:" label, its CONTEXT (which PL/pgSQL
/// function, which line) and its hints: what the operator asked wrong, not the database's
/// internals.
std::string refusal_text(const pqxx::sql_error& e) {
    std::string text = e.what();
    text = text.substr(0, text.find('\n'));
    for (const std::string label : {"ERROR:", "FATAL:"}) {
        if (text.rfind(label, 0) == 0) text.erase(0, label.size());
    }
    const auto start = text.find_first_not_of(' ');
    return start == std::string::npos ? text : text.substr(start);
}

/// A refusal of what was asked (a dependency that is no job of the organization, an invalid
/// one): 23503 and 22023 are what aclaim_add_dependencies raises, and nothing else an enqueue runs
/// raises them.
bool refused_by_enqueue(const pqxx::sql_error& e) {
    return e.sqlstate() == "23503" || e.sqlstate() == "22023";
}

/// ": job 17", ": jobs 17, 18, 19" or ": jobs 17 to 1016 (1000 ids)": what was made, so that the
/// next command can name it without a `jobs list` first.
std::string id_summary(std::vector<store::JobId> ids) {
    constexpr std::size_t kListed = 10;
    if (ids.empty()) return "";
    if (ids.size() == 1) return ": job " + std::to_string(ids.front());
    std::sort(ids.begin(), ids.end());
    std::string out = ": jobs ";
    if (ids.size() > kListed) {
        return out + std::to_string(ids.front()) + " to " + std::to_string(ids.back()) + " (" +
               std::to_string(ids.size()) + " ids)";
    }
    for (std::size_t i = 0; i < ids.size(); ++i) {
        if (i > 0) out += ", ";
        out += std::to_string(ids[i]);
    }
    return out;
}

/// Past this many jobs in one command, enqueue brings the table's statistics up to date itself
/// (kAnalyzeJobs says why).
constexpr std::int64_t kAnalyzeAfterJobs = 10'000;

/// ANALYZE jobs after a bulk enqueue. The jobs are written either way: a login that may not
/// analyze the table (only its owner may) is told so, and autovacuum catches up later.
void analyze_jobs(const std::string& dsn) {
    try {
        pqxx::connection conn(dsn);
        pqxx::nontransaction session(conn);
        session.exec(ops::sql::kAnalyzeJobs.text);
    } catch (const pqxx::sql_error& e) {
        std::cerr << "aclaimctl: the jobs are enqueued; their statistics were not refreshed ("
                  << e.what() << "): run ANALYZE jobs as the table's owner\n";
    }
}

int run_enqueue(const Global& global, const EnqueueArgs& a) {
    const base::Clock& clock = global.clock;
    auto records = gather(a);
    apply_lifecycle(a, records, clock.now());
    const auto window = duration_option(a.dedupe_window, "--dedupe-window");
    require_known_queues(global, a, records);
    store::AssignmentStore store(require_dsn(global));
    const auto total = static_cast<std::int64_t>(records.size());
    // A bar for a person watching a long load; a short one, or a script, gets the summary only.
    ProgressBar progress(clock, "enqueue", total,
                         is_terminal(2) && total > static_cast<std::int64_t>(a.batch));
    std::map<store::OrgId, std::int64_t> per_org;
    std::vector<store::Enqueued> existing;
    std::vector<store::JobId> created_ids;
    std::int64_t waiting = 0;
    // Every record's job, new or holding its dedupe key, as written: what --ids prints.
    std::vector<store::JobId> record_ids;
    std::int64_t done = 0;
    int transactions = 0;
    try {
        for (std::size_t begin = 0; begin < records.size();) {
            const std::size_t end =
                std::min(records.size(), begin + static_cast<std::size_t>(a.batch));
            // One statement per organization in the batch; each keeps the file's order.
            std::map<store::OrgId, std::vector<store::NewJob>> by_org;
            for (std::size_t i = begin; i < end; ++i)
                by_org[records[i].org_id].push_back(records[i].job);
            for (const auto& [org, jobs] : by_org) {
                std::int64_t created = 0;
                for (const auto& e : store.enqueue_each(org, jobs, clock.now(),
                                                        window.value_or(base::Duration{0}))) {
                    record_ids.push_back(e.id);
                    if (e.created) {
                        ++created;
                        if (e.state == store::JobState::Waiting) ++waiting;
                        created_ids.push_back(e.id);
                    } else {
                        existing.push_back(e);
                    }
                }
                ++transactions;
                per_org[org] += created;
                done += static_cast<std::int64_t>(jobs.size());
                progress.update(done);
            }
            begin = end;
        }
    } catch (const std::exception& e) {
        progress.finish();
        std::cerr << "aclaimctl: enqueued " << done << " of " << total
                  << " jobs before the error below; the rest were not written\n";
        const auto* refused = dynamic_cast<const pqxx::sql_error*>(&e);
        if (refused != nullptr && refused_by_enqueue(*refused))
            throw UsageError(refusal_text(*refused));
        throw;
    }
    progress.finish();
    if (done >= kAnalyzeAfterJobs) analyze_jobs(require_dsn(global));
    // With --ids the job ids alone go to standard output, for `job=$(aclaimctl enqueue --ids ...)`;
    // what a person reads goes to standard error then.
    std::ostream& say = a.ids_only ? std::cerr : std::cout;
    if (a.ids_only) {
        for (const auto id : record_ids) std::cout << id << "\n";
    }
    for (const auto& e : existing) {
        say << "job " << e.id << " (" << store::to_string(e.state)
            << ") already holds the dedupe key; nothing new enqueued for it\n";
    }
    done -= static_cast<std::int64_t>(existing.size());
    say << "enqueued " << done << (done == 1 ? " job" : " jobs");
    if (per_org.size() == 1) {
        say << " for organization " << per_org.begin()->first;
    } else {
        say << " (";
        bool first = true;
        for (const auto& [org, n] : per_org) {
            say << (first ? "" : ", ") << "organization " << org << ": " << n;
            first = false;
        }
        say << ")";
    }
    say << " in " << transactions << (transactions == 1 ? " transaction" : " transactions");
    say << id_summary(created_ids);
    if (waiting > 0) say << " (" << waiting << " waiting for their dependencies)";
    say << "\n";
    return 0;
}

}  // namespace

void add_enqueue_command(CLI::App& app, Global& global, Action& action) {
    auto [cmd, args] = add_command<EnqueueArgs>(
        app, "enqueue",
        "Add pending jobs: payloads as arguments, --count synthetic ones, or records from --csv "
        "or --jsonl (a file, or - for standard input)",
        global, action, run_enqueue);
    cmd->add_option("payloads", args->payloads, "Payloads, one job each (with --org)");
    base::add_org(*cmd, args->org,
                  "Organization id; with --csv/--jsonl, the default for records without one");
    cmd->add_option("--count", args->count, "How many synthetic jobs, payloads '<prefix>-<n>'")
        ->check(CLI::Range(1, 10000000));
    cmd->add_option("--payload", args->payload, "Payload prefix of the synthetic jobs")
        ->capture_default_str();
    cmd->add_option("--priority", args->priority, "Higher is claimed first (default for records)")
        ->capture_default_str();
    cmd->add_option("--max-attempts", args->max_attempts,
                    "Attempts before the job is discarded (default for records; unset: the "
                    "queue's setting, then 3)")
        ->check(CLI::Range(1, 1000));
    cmd->add_option("--queue", args->queue, "The queue: workers serving it claim the jobs")
        ->capture_default_str();
    cmd->add_option("--delay", args->delay, "Not claimable before this long from now, e.g. 90s");
    cmd->add_option("--run-at", args->run_at,
                    "Not claimable before this instant, e.g. 2026-12-01T09:00:00Z");
    cmd->add_option("--backoff-base", args->backoff_base,
                    "First retry's wait, doubling each attempt (unset: the queue's, then none)");
    cmd->add_option("--backoff-cap", args->backoff_cap,
                    "Longest retry wait (unset: the queue's, then 5m)");
    cmd->add_option("--run-timeout", args->run_timeout,
                    "Run deadline of each attempt, renewals included (unset: the queue's, or "
                    "none)");
    cmd->add_option("--dedupe-key", args->dedupe_key,
                    "While a job of the organization holds this key, enqueueing it again returns "
                    "that job");
    cmd->add_option("--dedupe-window", args->dedupe_window,
                    "How long a finished job still holds its key (default: not at all)");
    cmd->add_option("--depends-on", args->depends_on,
                    "Jobs (ids, comma-separated) each enqueued job waits for: it is claimable once "
                    "all of them completed");
    cmd->add_option("--on-failure", args->on_failure,
                    "What a dependency that fails, is discarded or cancelled does: cancel the job, "
                    "or run it anyway")
        ->check(CLI::IsMember({"cancel", "run"}))
        ->capture_default_str();
    cmd->add_option("--exclude-keys", args->exclude_keys,
                    "Separation of duties: reviewers (key names, comma-separated) each enqueued "
                    "job is never handed to");
    cmd->add_option("--exclude-completers-of", args->exclude_completers_of,
                    "Separation of duties: jobs (ids, comma-separated) whose completer each "
                    "enqueued job is never handed to; nobody gets it while one has not ended");
    auto* csv = cmd->add_option("--csv", args->csv,
                                "CSV with a header: payload, and any of org, priority, "
                                "max_attempts, queue, dedupe_key, run_at, depends_on, on_failure, "
                                "exclude_keys, exclude_completers_of (the flags fill the rest)");
    cmd->add_option("--jsonl", args->jsonl,
                    "JSON lines: {\"org\": 1, \"priority\": 0, \"payload\": \"...\"} and any of "
                    "the CSV's other fields, lists as arrays")
        ->excludes(csv);
    cmd->add_option("--batch", args->batch, "Jobs per transaction")
        ->check(CLI::Range(1, 100000))
        ->capture_default_str();
    cmd->add_flag("--allow-past", args->allow_past,
                  "Accept a --run-at (or a record's run_at) more than a minute in the past: the "
                  "job is claimable at once");
    cmd->add_flag("--new-queue", args->new_queue,
                  "Accept a queue the organization has no settings and no job in (otherwise "
                  "refused, with its queues, as a misspelling)");
    cmd->add_flag("--ids", args->ids_only,
                  "Print only each job's id, one a line (the summary goes to standard error)");
}

}  // namespace aclaim::ctl
