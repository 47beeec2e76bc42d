// enqueue: jobs from arguments, from a CSV file or from JSON lines, written in batches.

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>

#include "common/base/clock.hpp"
#include "common/store/assignment_store.hpp"
#include "coordinator/ctl/console.hpp"
#include "coordinator/ctl/ctl.hpp"
#include "coordinator/ctl/job_records.hpp"
#include "coordinator/ctl/progress.hpp"

namespace aclaim::ctl {

namespace {

struct EnqueueArgs {
    std::int64_t org = 0;
    int count = 0;
    int priority = 0;
    int max_attempts = 3;
    std::string payload = "review";
    std::vector<std::string> payloads;
    std::string csv;
    std::string jsonl;
    int batch = 1000;
};

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

int run_enqueue(const Global& global, const EnqueueArgs& a) {
    const auto records = gather(a);
    common::AssignmentStore store(require_dsn(global));
    common::SystemClock clock;
    const auto total = static_cast<std::int64_t>(records.size());
    // A bar for a person watching a long load; a short one, or a script, gets the summary only.
    ProgressBar progress(clock, "enqueue", total,
                         is_terminal(2) && total > static_cast<std::int64_t>(a.batch));
    std::map<common::OrgId, std::int64_t> per_org;
    std::int64_t done = 0;
    int transactions = 0;
    try {
        for (std::size_t begin = 0; begin < records.size();) {
            const std::size_t end =
                std::min(records.size(), begin + static_cast<std::size_t>(a.batch));
            // One statement per organization in the batch; each keeps the file's order.
            std::map<common::OrgId, std::vector<common::NewJob>> by_org;
            for (std::size_t i = begin; i < end; ++i)
                by_org[records[i].org_id].push_back(records[i].job);
            for (const auto& [org, jobs] : by_org) {
                store.enqueue(org, jobs, clock.now());
                ++transactions;
                per_org[org] += static_cast<std::int64_t>(jobs.size());
                done += static_cast<std::int64_t>(jobs.size());
                progress.update(done);
            }
            begin = end;
        }
    } catch (const std::exception&) {
        progress.finish();
        std::cerr << "aclaimctl: enqueued " << done << " of " << total
                  << " jobs before the error below; the rest were not written\n";
        throw;
    }
    progress.finish();
    std::cout << "enqueued " << done << (done == 1 ? " job" : " jobs");
    if (per_org.size() == 1) {
        std::cout << " for organization " << per_org.begin()->first;
    } else {
        std::cout << " (";
        bool first = true;
        for (const auto& [org, n] : per_org) {
            std::cout << (first ? "" : ", ") << "organization " << org << ": " << n;
            first = false;
        }
        std::cout << ")";
    }
    std::cout << " in " << transactions
              << (transactions == 1 ? " transaction\n" : " transactions\n");
    return 0;
}

}  // namespace

void add_enqueue_command(CLI::App& app, Global& global, Action& action) {
    auto args = std::make_shared<EnqueueArgs>();
    auto* cmd = app.add_subcommand(
        "enqueue",
        "Add pending jobs: payloads as arguments, --count synthetic ones, or records from --csv "
        "or --jsonl (a file, or - for standard input)");
    cmd->add_option("payloads", args->payloads, "Payloads, one job each (with --org)");
    cmd->add_option("--org", args->org,
                    "Organization id; with --csv/--jsonl, the default for records without one")
        ->check(CLI::PositiveNumber);
    cmd->add_option("--count", args->count, "How many synthetic jobs, payloads '<prefix>-<n>'")
        ->check(CLI::Range(1, 10000000));
    cmd->add_option("--payload", args->payload, "Payload prefix of the synthetic jobs")
        ->capture_default_str();
    cmd->add_option("--priority", args->priority, "Higher is claimed first (default for records)")
        ->capture_default_str();
    cmd->add_option("--max-attempts", args->max_attempts,
                    "Claims allowed before the job fails (default for records)")
        ->check(CLI::Range(1, 1000))
        ->capture_default_str();
    auto* csv = cmd->add_option(
        "--csv", args->csv, "CSV with a header: payload, and any of org, priority, max_attempts");
    cmd->add_option("--jsonl", args->jsonl,
                    "JSON lines: {\"org\": 1, \"priority\": 0, \"payload\": \"...\"}")
        ->excludes(csv);
    cmd->add_option("--batch", args->batch, "Jobs per transaction")
        ->check(CLI::Range(1, 100000))
        ->capture_default_str();
    cmd->callback([&global, &action, args] {
        action = [&global, args] { return run_enqueue(global, *args); };
    });
}

}  // namespace aclaim::ctl
