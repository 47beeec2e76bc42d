// aclaimctl retention: what retention did and would do, a prune pass by hand, the archiving of
// old job_events partitions, and reading an archive back.

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "common/base/clock.hpp"
#include "common/ops/event_archive.hpp"
#include "common/ops/recovery.hpp"
#include "common/ops/retention_store.hpp"
#include "common/store/assignment_store.hpp"
#include "ctl/ctl.hpp"
#include "ctl/terminal.hpp"

namespace aclaim::ctl {

namespace {

std::string bytes_text(std::optional<std::int64_t> b) {
    if (!b) return "-";
    char buf[32];
    const double v = static_cast<double>(*b);
    if (v >= 1024.0 * 1024 * 1024) {
        std::snprintf(buf, sizeof buf, "%.2f GB", v / (1024.0 * 1024 * 1024));
    } else if (v >= 1024.0 * 1024) {
        std::snprintf(buf, sizeof buf, "%.1f MB", v / (1024.0 * 1024));
    } else {
        std::snprintf(buf, sizeof buf, "%.0f kB", v / 1024.0);
    }
    return buf;
}

std::string kept_text(base::Duration d) {
    return d == base::Duration::max() ? "forever" : format_duration(d);
}

struct StatusArgs {
    bool json = false;
};

int run_status(const Global& global, const StatusArgs& a) {
    pqxx::connection conn(require_dsn(global));
    ops::RetentionStore store(conn);
    const auto ledger = store.ledger();
    const auto parts = store.partitions();
    const auto sizes = store.table_sizes();
    if (a.json) {
        nlohmann::json out{{"pruned", nlohmann::json::array()},
                           {"partitions", nlohmann::json::array()},
                           {"tables", nlohmann::json::array()}};
        for (const auto& t : ledger) {
            out["pruned"].push_back({{"org_id", t.org_id},
                                     {"batches", t.batches},
                                     {"completed", t.completed},
                                     {"failed", t.failed},
                                     {"discarded", t.discarded},
                                     {"cancelled", t.cancelled},
                                     {"results", t.results},
                                     {"last", ops::format_instant(t.last)}});
        }
        for (const auto& p : parts) {
            out["partitions"].push_back(
                {{"name", p.name},
                 {"from", p.from ? nlohmann::json(ops::format_instant(*p.from)) : nullptr},
                 {"to", ops::format_instant(p.to)},
                 {"state", p.state},
                 {"rows", p.rows ? nlohmann::json(*p.rows) : nullptr},
                 {"estimated_rows", p.estimated_rows ? nlohmann::json(*p.estimated_rows) : nullptr},
                 {"analyzed", !p.never_analyzed},
                 {"bytes", p.bytes ? nlohmann::json(*p.bytes) : nullptr},
                 {"archive_file", p.archive_file},
                 {"sha256", p.sha256}});
        }
        for (const auto& t : sizes) {
            out["tables"].push_back(
                {{"name", t.name}, {"table_bytes", t.table_bytes}, {"index_bytes", t.index_bytes}});
        }
        std::cout << out.dump(2) << "\n";
        return 0;
    }
    std::printf("pruned by retention (the prune ledger, job_prunes):\n");
    if (ledger.empty()) std::printf("  nothing yet\n");
    for (const auto& t : ledger) {
        std::printf(
            "  org %lld: %lld completed, %lld failed, %lld discarded, %lld cancelled, %lld "
            "results, in %lld batches; last %s\n",
            static_cast<long long>(t.org_id), static_cast<long long>(t.completed),
            static_cast<long long>(t.failed), static_cast<long long>(t.discarded),
            static_cast<long long>(t.cancelled), static_cast<long long>(t.results),
            static_cast<long long>(t.batches), ops::format_instant(t.last).c_str());
    }
    std::printf("\njob_events partitions:\n  %-22s %-22s %-22s %-9s %12s %10s  %s\n", "name",
                "from", "to", "state", "rows", "size", "archive");
    for (const auto& p : parts) {
        const auto rows = p.rows ? p.rows : p.estimated_rows;
        std::printf("  %-22s %-22s %-22s %-9s %12s %10s  %s\n", p.name.c_str(),
                    p.from ? ops::format_instant(*p.from).c_str() : "(open)",
                    ops::format_instant(p.to).c_str(), p.state.c_str(),
                    p.never_analyzed && !p.rows ? "not analyzed"
                    : rows ? ((p.rows ? "" : "~") + std::to_string(*rows)).c_str()
                           : "-",
                    bytes_text(p.bytes).c_str(), p.archive_file.c_str());
    }
    std::printf("\ntables:\n");
    for (const auto& t : sizes) {
        std::printf("  %-12s table %10s  indexes %10s\n", t.name.c_str(),
                    bytes_text(t.table_bytes).c_str(), bytes_text(t.index_bytes).c_str());
    }
    return 0;
}

struct RunArgs {
    bool dry_run = false;
    int batch = 500;
    int partitions_ahead = 3;
    bool json = false;
};

int run_prune(const Global& global, const RunArgs& a) {
    const auto now = global.clock.now();
    if (a.dry_run) {
        pqxx::connection conn(require_dsn(global));
        const auto preview = ops::RetentionStore(conn).preview(now);
        if (a.json) {
            nlohmann::json out = {{"prunable", nlohmann::json::array()}};
            for (const auto& p : preview) {
                out["prunable"].push_back({{"org_id", p.org_id},
                                           {"queue", p.queue},
                                           {"state", p.state},
                                           {"prunable", p.prunable},
                                           {"kept", kept_text(p.kept)},
                                           {"oldest_finished", ops::format_instant(p.oldest)}});
            }
            std::cout << out.dump() << "\n";
            return 0;
        }
        std::printf("%6s %-20s %-10s %10s %10s  %s\n", "org", "queue", "state", "prunable", "kept",
                    "oldest finished");
        std::int64_t total = 0;
        for (const auto& p : preview) {
            std::printf("%6lld %-20s %-10s %10lld %10s  %s\n", static_cast<long long>(p.org_id),
                        p.queue.c_str(), p.state.c_str(), static_cast<long long>(p.prunable),
                        kept_text(p.kept).c_str(), ops::format_instant(p.oldest).c_str());
            total += p.prunable;
        }
        std::printf("a prune pass now would remove %lld finished jobs with their results\n",
                    static_cast<long long>(total));
        return 0;
    }
    store::StoreOptions options;
    options.application_name = "aclaimctl-retention";
    options.row_security = false;
    store::AssignmentStore store(require_dsn(global), options);
    if (!store.try_retention_lock()) {
        std::printf(
            "another session holds the retention lock (a coordinator's pass, or another "
            "aclaimctl retention run): nothing done\n");
        return 3;
    }
    for (const auto& name : store.ensure_event_partitions(now, a.partitions_ahead)) {
        std::printf("created partition %s\n", name.c_str());
    }
    store::Pruned total;
    int batches = 0;
    std::int64_t got = 0;
    do {
        got = 0;
        for (const auto& p : store.prune_finished(now, a.batch)) {
            got += p.jobs();
            total.completed += p.completed;
            total.failed += p.failed;
            total.discarded += p.discarded;
            total.cancelled += p.cancelled;
            total.results += p.results;
        }
        ++batches;
    } while (got == a.batch);
    store.release_retention_lock();
    std::printf(
        "pruned %lld finished jobs (%lld completed, %lld failed, %lld discarded, %lld "
        "cancelled) and %lld results in %d batches\n",
        static_cast<long long>(total.jobs()), static_cast<long long>(total.completed),
        static_cast<long long>(total.failed), static_cast<long long>(total.discarded),
        static_cast<long long>(total.cancelled), static_cast<long long>(total.results), batches);
    return 0;
}

struct ArchiveArgs {
    ops::ArchiveOptions options;
    std::string older_than = "90d";
};

int run_archive(const Global& global, ArchiveArgs a) {
    const auto age = parse_duration(a.older_than);
    if (!age) throw UsageError("--older-than '" + a.older_than + "' is not a duration like 90d");
    a.options.older_than = *age;
    if (a.options.dir.empty() && !a.options.dry_run)
        throw UsageError("--dir must name where archives are written");
    // A month of events is read in one statement: no statement bound.
    pqxx::connection conn(require_dsn(global, Statements::kUnbounded));
    const auto outcomes = ops::RetentionStore(conn).archive(a.options, global.clock.now());
    bool failed = false;
    for (const auto& o : outcomes) {
        std::printf("%-22s %-13s %s%s%s\n", o.partition.c_str(), o.action.c_str(), o.detail.c_str(),
                    o.file.empty() ? "" : " -> ", o.file.c_str());
        failed = failed || o.action == "failed" || o.action == "unaccounted";
    }
    if (outcomes.empty()) {
        std::printf("no partition ended more than %s ago\n", a.older_than.c_str());
    }
    return failed ? 1 : 0;
}

struct ReadArgs {
    std::string file;
    std::int64_t job = 0;
    std::int64_t org = 0;
    bool verify_only = false;
};

int run_read(const ReadArgs& a) {
    std::ifstream in(a.file);
    if (!in) {
        throw UsageError("cannot read " + a.file + ": " + std::strerror(errno) +
                         " (archives are the DIR/<partition>.events.jsonl files `retention "
                         "archive --dir DIR` wrote; `retention status` names each partition's)");
    }
    std::int64_t shown = 0;
    const auto contents = ops::read_archive(in, [&](const store::AuditEvent& e) {
        if (a.verify_only) return;
        if (a.job > 0 && e.job_id != a.job) return;
        if (a.org > 0 && e.org_id != a.org) return;
        std::cout << ops::archive_line(e) << "\n";
        ++shown;
    });
    std::fprintf(
        stderr, "%s: partition %s [%s, %s), %lld events (ids %lld..%lld), SHA-256 %s verified%s\n",
        a.file.c_str(), contents.header.partition.c_str(),
        contents.header.from ? ops::format_instant(*contents.header.from).c_str() : "(open)",
        ops::format_instant(contents.header.to).c_str(),
        static_cast<long long>(contents.summary.rows),
        static_cast<long long>(contents.summary.min_id),
        static_cast<long long>(contents.summary.max_id), contents.summary.sha256.c_str(),
        a.verify_only ? "" : ("; " + std::to_string(shown) + " shown").c_str());
    return 0;
}

}  // namespace

void add_retention_command(CLI::App& app, Global& global, Action& action) {
    auto* r =
        add_group(app, "retention",
                  "What retention removed and would remove, a prune pass by hand, archiving old "
                  "job_events partitions, reading an archive");

    auto [s, status] = add_command<StatusArgs>(
        *r, "status", "The prune ledger per organization, job_events' partitions, the table sizes",
        global, action, run_status);
    s->add_flag("--json", status->json, "Print one JSON object");

    auto [p, run] = add_command<RunArgs>(
        *r, "run",
        "One prune pass now, as a coordinator's retention thread runs it (under the same lock); "
        "--dry-run shows what it would remove",
        global, action, run_prune);
    auto* dry =
        p->add_flag("--dry-run", run->dry_run, "Count what would be removed, per queue and state");
    p->add_flag("--json", run->json, "With --dry-run: one JSON object")->needs(dry);
    p->add_option("--batch", run->batch, "Jobs per prune batch")
        ->check(CLI::Range(1, 10000))
        ->capture_default_str();
    p->add_option("--partitions-ahead", run->partitions_ahead,
                  "Months of job_events partitions to have ahead")
        ->check(CLI::Range(1, 24))
        ->capture_default_str();

    auto [a, archive] = add_command<ArchiveArgs>(
        *r, "archive",
        "Detach job_events partitions that ended long enough ago, write each to an archive file, "
        "verify it and drop the partition (needs the owner of job_events)",
        global, action, run_archive);
    a->add_option("--dir", archive->options.dir, "Where archives are written");
    a->add_option("--older-than", archive->older_than,
                  "Archive partitions that ended at least this long ago")
        ->capture_default_str();
    a->add_flag("--dry-run", archive->options.dry_run, "Say what would be archived or held");

    auto read = std::make_shared<ReadArgs>();
    auto* rd = r->add_subcommand(
        "read", "Verify an archive and print its events as JSON Lines (all, or one job's)");
    rd->add_option("file", read->file, "An archive written by retention archive")->required();
    rd->add_option("--job", read->job, "Only this job's events");
    base::add_org(*rd, read->org, "Only this organization's events");
    rd->add_flag("--verify", read->verify_only, "Verify only; print nothing but the summary");
    rd->callback([&action, read] { action = [read] { return run_read(*read); }; });
}

}  // namespace aclaim::ctl
