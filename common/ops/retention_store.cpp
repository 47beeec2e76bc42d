
#include "common/ops/retention_store.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/ops/event_archive.hpp"
#include "common/ops/retention_sql.hpp"
#include "common/store/assignment_store.hpp"
#include "common/store/pg_field.hpp"

namespace aclaim::ops {

namespace {

constexpr int kPageRows = 10000;

/// Every row `text` returns with `args`, in a read-only transaction of its own, each read by `of`.
template <typename Of, typename... Args>
auto read_rows(pqxx::connection& conn, const std::string& text, Of of, Args&&... args) {
    pqxx::read_transaction txn(conn);
    std::vector<std::invoke_result_t<Of, const pqxx::row&>> out;
    for (const auto& r : txn.exec_params(text, std::forward<Args>(args)...)) out.push_back(of(r));
    return out;
}

std::string with_partition(const char* text, const std::string& quoted) {
    return store::sql::compose(text, {{"PARTITION", quoted}});
}

/// Makes what was written to `path` durable: the file's bytes, then its directory entry.
void sync_path(const std::filesystem::path& path) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) throw std::runtime_error("cannot open " + path.string() + " to sync it");
    const int rc = ::fsync(fd);
    ::close(fd);
    if (rc != 0) throw std::runtime_error("fsync of " + path.string() + " failed");
}

EventPartition partition_of(const pqxx::row& r) {
    EventPartition p;
    p.name = r["name"].as<std::string>();
    if (!r["from_us"].is_null()) p.from = r["from_us"].as<base::Instant>();
    p.to = r["to_us"].as<base::Instant>();
    p.state = r["state"].as<std::string>();
    p.archive_file = r["archive_file"].as<std::string>();
    p.sha256 = r["sha256"].as<std::string>();
    return p;
}

/// Verifies the archive at `file`; the summary it holds.
ArchiveSummary verify_file(const std::string& file) {
    std::ifstream in(file);
    if (!in) throw std::runtime_error("cannot read archive " + file);
    return read_archive(in, [](const store::AuditEvent&) {}).summary;
}

}  // namespace

int prune_park_refusals(pqxx::connection& conn, base::Instant now, int batch) {
    pqxx::work txn(conn, "prune_park_refusals");
    const auto removed =
        txn.exec_params1(sql::kPruneParkRefusals.text, base::to_micros(now), batch)[0].as<int>();
    txn.commit();
    return removed;
}

std::vector<PrunePreview> RetentionStore::preview(base::Instant now) {
    return read_rows(
        conn_, sql::kRetentionPreview.text,
        [](const pqxx::row& r) {
            PrunePreview p;
            p.org_id = r["org_id"].as<store::OrgId>();
            p.queue = r["queue"].as<std::string>();
            p.state = r["state"].as<std::string>();
            p.prunable = r["prunable"].as<std::int64_t>();
            p.oldest = r["oldest_us"].as<base::Instant>();
            p.kept = base::Duration(r["keep_us"].as<std::int64_t>());
            return p;
        },
        now);
}

std::vector<PruneTotals> RetentionStore::ledger() {
    return read_rows(conn_, sql::kRetentionLedger.text, [](const pqxx::row& r) {
        PruneTotals t;
        static_cast<store::Pruned&>(t) = store::pruned_of(r);
        t.batches = r["batches"].as<std::int64_t>();
        t.last = r["last_us"].as<base::Instant>();
        return t;
    });
}

std::vector<EventPartition> RetentionStore::partitions() {
    return read_rows(conn_, sql::kEventPartitions.text, [](const pqxx::row& r) {
        EventPartition p = partition_of(r);
        p.rows = store::optional_of<std::int64_t>(r["rows"]);
        const auto estimate = store::optional_of<std::int64_t>(r["estimated_rows"]);
        p.never_analyzed = estimate && *estimate < 0;
        if (!p.never_analyzed) p.estimated_rows = estimate;
        p.bytes = store::optional_of<std::int64_t>(r["bytes"]);
        return p;
    });
}

std::vector<TableSize> RetentionStore::table_sizes() {
    return read_rows(conn_, sql::kRetentionTableSizes.text, [](const pqxx::row& r) {
        return TableSize{r["name"].as<std::string>(), r["table_bytes"].as<std::int64_t>(),
                         r["index_bytes"].as<std::int64_t>()};
    });
}

std::optional<std::pair<store::OrgId, base::Instant>> RetentionStore::pruned(store::JobId job) {
    pqxx::read_transaction txn(conn_);
    const auto rows = txn.exec_params(sql::kPrunedJob.text, job);
    if (rows.empty()) return std::nullopt;
    return std::pair{rows[0]["org_id"].as<store::OrgId>(),
                     rows[0]["pruned_us"].as<base::Instant>()};
}

std::vector<ArchiveOutcome> RetentionStore::archive(const ArchiveOptions& options,
                                                    base::Instant now) {
    std::vector<EventPartition> due;
    {
        pqxx::read_transaction txn(conn_);
        for (const auto& r :
             txn.exec_params(sql::kPartitionsDue.text, now, options.older_than.count())) {
            due.push_back(partition_of(r));
        }
    }
    if (!options.dry_run && !due.empty()) std::filesystem::create_directories(options.dir);
    std::vector<ArchiveOutcome> out;
    for (const auto& p : due) {
        try {
            out.push_back(archive_one(p, options, now));
        } catch (const std::exception& e) {
            out.push_back({p.name, "failed", e.what(), "", 0});
            break;
        }
    }
    return out;
}

ArchiveOutcome RetentionStore::archive_one(const EventPartition& p, const ArchiveOptions& options,
                                           base::Instant now) {
    ArchiveOutcome out;
    out.partition = p.name;
    std::string quoted;
    {
        pqxx::nontransaction session(conn_);
        quoted = session.quote_name(p.name);
    }
    if (p.state == "attached") {
        pqxx::read_transaction txn(conn_);
        std::string held;
        for (const auto& r : txn.exec(with_partition(sql::kPartitionHolders, quoted))) {
            held += (held.empty() ? "" : ", ") + r["id"].as<std::string>() + " (" +
                    r["state"].as<std::string>() + ")";
        }
        if (!held.empty()) {
            out.action = "held";
            out.detail = "jobs that still exist have events in it: " + held;
            return out;
        }
        std::string lost;
        for (const auto& r : txn.exec(with_partition(sql::kPartitionUnaccounted, quoted))) {
            lost += (lost.empty() ? "" : ", ") + r["job_id"].as<std::string>();
        }
        if (!lost.empty()) {
            out.action = "unaccounted";
            out.detail =
                "events of jobs with neither a row nor a prune record (see aclaimctl "
                "check): " +
                lost;
            return out;
        }
    }
    if (options.dry_run) {
        out.action = "would_archive";
        out.detail =
            p.state == "attached" ? "detach, write, verify, drop" : "resume from " + p.state;
        return out;
    }
    if (p.state == "attached") {
        pqxx::work mark(conn_, "archive_mark_detaching");
        mark.exec_params(sql::kMarkDetaching.text, p.name);
        mark.commit();
    }
    std::string file = p.archive_file;
    if (p.state == "attached" || p.state == "detaching") {
        // Detached, whatever step an earlier run stopped after.
        pqxx::row at;
        {
            pqxx::read_transaction txn(conn_);
            at = txn.exec_params1(sql::kPartitionAttachment, p.name);
        }
        if (!at["exists"].as<bool>())
            throw std::runtime_error("partition " + p.name + " is gone before it was archived");
        if (!at["detach_pending"].is_null()) {
            pqxx::nontransaction session(conn_);
            session.exec(with_partition(
                at["detach_pending"].as<bool>() ? sql::kFinalizeDetach : sql::kDetachPartition,
                quoted));
        }
        const std::filesystem::path path = std::filesystem::absolute(
            std::filesystem::path(options.dir) / (p.name + ".events.jsonl"));
        const std::filesystem::path tmp = path.string() + ".tmp";
        ArchiveSummary written;
        {
            std::ofstream stream(tmp, std::ios::binary | std::ios::trunc);
            if (!stream) throw std::runtime_error("cannot write " + tmp.string());
            ArchiveWriter writer(stream, {p.name, p.from, p.to, now});
            std::int64_t after = 0;
            const std::string page = with_partition(sql::kPartitionPage, quoted);
            while (true) {
                pqxx::read_transaction txn(conn_);
                const auto rows = txn.exec_params(page, after, kPageRows);
                for (const auto& r : rows) {
                    writer.add({r["id"].as<std::int64_t>(), r["job_id"].as<store::JobId>(),
                                r["org_id"].as<store::OrgId>(),
                                r["generation"].as<store::Generation>(),
                                r["kind"].as<std::string>(), r["worker"].as<std::string>(),
                                r["at_us"].as<base::Instant>(), r["detail"].as<std::string>()});
                    after = r["id"].as<std::int64_t>();
                }
                if (rows.size() < static_cast<std::size_t>(kPageRows)) break;
            }
            written = writer.finish();
        }
        sync_path(tmp);
        std::filesystem::rename(tmp, path);
        sync_path(path.parent_path());
        const ArchiveSummary read = verify_file(path.string());
        std::int64_t counted = 0;
        {
            pqxx::read_transaction txn(conn_);
            counted = txn.exec1(with_partition(sql::kCountPartition, quoted))[0].as<std::int64_t>();
        }
        if (read.rows != written.rows || read.sha256 != written.sha256 || counted != read.rows) {
            throw std::runtime_error("archive " + path.string() + " holds " +
                                     std::to_string(read.rows) + " events, the partition " +
                                     std::to_string(counted) + ": kept, not dropped");
        }
        pqxx::work mark(conn_, "archive_mark_archived");
        mark.exec_params(sql::kMarkArchived.text, p.name, now, path.string(), read.rows,
                         read.min_id, read.max_id, read.sha256);
        mark.commit();
        file = path.string();
        out.rows = read.rows;
    } else {
        // Archived by an earlier run that stopped before the drop: the file must still verify.
        const ArchiveSummary read = verify_file(file);
        if (read.sha256 != p.sha256)
            throw std::runtime_error("archive " + file + " no longer matches its recorded SHA-256");
        out.rows = read.rows;
    }
    {
        pqxx::nontransaction session(conn_);
        session.exec(with_partition(sql::kDropPartition, quoted));
    }
    pqxx::work mark(conn_, "archive_mark_dropped");
    mark.exec_params(sql::kMarkDropped.text, p.name);
    mark.commit();
    out.action = "archived";
    out.file = file;
    out.detail = std::to_string(out.rows) + " events";
    return out;
}

}  // namespace aclaim::ops
