// Retention on a real PostgreSQL under a manual clock: finished jobs kept per state and queue,
// then pruned with their results in bounded batches that never block a claim; the prune ledger
// that keeps "nothing lost" provable; one pruner at a time; job_events partitioned by month,
// created ahead, archived, read back and dropped; and the in-place migration from the schema
// before it with jobs in every state.

#include <barrier>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/ops/checker.hpp"
#include "common/ops/event_archive.hpp"
#include "common/ops/operator_store.hpp"
#include "common/ops/recovery_store.hpp"
#include "common/ops/retention_store.hpp"
#include "common/store/assignment_store.hpp"
#include "common/store/migrations.hpp"
#include "common/store/pg_time.hpp"
#include "coordinator/db/retention.hpp"
#include "tests/pg/ctl_run.hpp"
#include "tests/support/checker_support.hpp"
#include "tests/support/rows.hpp"
#include "tests/support/store_fixture.hpp"
#include "tests/support/test_database.hpp"

using namespace aclaim;
using base::Duration;
using base::Instant;
using base::ManualClock;
using store::AssignmentStore;
using store::JobId;
using store::NewJob;

using testing::kLease;
using testing::kT0;

using namespace std::chrono_literals;

namespace {
constexpr Duration kDay = std::chrono::hours(24);

/// The store fixture with the operator's store beside it.
struct Fixture : testing::StoreFixture {
    std::unique_ptr<pqxx::connection> ops_conn = db.connect();
    ops::OperatorStore ops{*ops_conn};

    JobId enqueue(const std::string& queue = "default", int max_attempts = 3) {
        NewJob j;
        j.queue = queue;
        j.payload = "review";
        j.max_attempts = max_attempts;
        return store.enqueue(1, {j}, clock.now()).at(0);
    }
    /// A job of the default queue, finished `how`.
    JobId finished(const std::string& how) {
        const JobId id = enqueue();
        finish(id, how);
        return id;
    }
    /// Claims the job (it must be the only pending one of its queue) and ends it.
    void finish(JobId id, const std::string& how, const std::string& queue = "default") {
        const auto out = store.claim(1, {"w", 1, {queue}}, kLease, clock.now());
        REQUIRE(out.leases.size() == 1);
        REQUIRE(out.leases[0].job_id == id);
        const store::TransitionRequest t{1, id, out.leases[0].generation, "w", "ref"};
        if (how == "completed") {
            store.complete(t, clock.now());
        } else {
            store::TransitionRequest f = t;
            f.reason = "broken";
            f.retryable = how == "discarded";
            store.fail(f, clock.now());
        }
        REQUIRE(state(id) == how);
    }
    std::string state(JobId id) {
        const auto snap = testing::job_snapshot(store.connection(), id);
        return snap.empty() ? "" : testing::job_state(store.connection(), id);
    }
    bool exists(JobId id) { return !testing::job_snapshot(store.connection(), id).empty(); }
    std::int64_t prune(int batch = 500) {
        std::int64_t n = 0;
        for (const auto& p : store.prune_finished(clock.now(), batch)) n += p.jobs();
        return n;
    }
    ops::CheckReport check() {
        auto conn = db.connect();
        return ops::check(ops::load_history(*conn));
    }
    std::int64_t scalar(const std::string& sql) {
        pqxx::work txn(*ops_conn);
        return txn.exec1(sql)[0].as<std::int64_t>();
    }
};

/// Sets a job aside as the recovery tool does, with its event.
void quarantine(pqxx::connection& conn, JobId id, Instant now) {
    pqxx::work txn(conn);
    txn.exec_params(
        "UPDATE jobs SET quarantined_from = state, state = 'quarantined', "
        "quarantine_reason = 'evidence' WHERE id = $1",
        id);
    txn.exec_params(
        "INSERT INTO job_events (job_id, org_id, generation, kind, worker, at, detail) "
        "SELECT id, org_id, generation, 'quarantined', 'recovery', aclaim_ts($2), 'evidence' "
        "FROM jobs WHERE id = $1",
        id, now);
    txn.commit();
}
}  // namespace

TEST_CASE(
    "finished jobs are kept for their state's retention, per queue, then pruned with "
    "their results",
    "[retention]") {
    Fixture f;
    ops::QueueSettings quick;
    quick.retain_completed = std::chrono::hours(1);
    f.ops.configure(1, "quick", quick, "ops", f.clock.now());

    const JobId fast = f.enqueue("quick");
    f.finish(fast, "completed", "quick");
    const JobId done = f.finished("completed");
    const JobId failed = f.finished("failed");
    const JobId discarded = f.enqueue("default", 1);
    f.finish(discarded, "discarded");
    const JobId cancelled = f.enqueue();
    f.ops.cancel({cancelled}, "ops", "withdrawn", f.clock.now());
    const JobId waiting = f.enqueue();
    const JobId held = f.enqueue("held");
    {
        const auto out = f.store.claim(1, {"w", 1, {"held"}}, kLease, f.clock.now());
        REQUIRE(out.leases.size() == 1);
    }
    const JobId set_aside = f.enqueue();
    const JobId set_aside_done = f.enqueue("aside");
    f.finish(set_aside_done, "completed", "aside");
    quarantine(*f.ops_conn, set_aside, f.clock.now());
    quarantine(*f.ops_conn, set_aside_done, f.clock.now());
    CHECK(testing::results_snapshot(f.store.connection(), done) != "");

    // Nothing is past its retention yet.
    CHECK(f.prune() == 0);

    f.clock.advance(2h);
    CHECK(f.prune() == 1);
    CHECK_FALSE(f.exists(fast));
    CHECK(testing::results_snapshot(f.store.connection(), fast).empty());
    CHECK(f.exists(done));

    f.clock.advance(7 * kDay);
    CHECK(f.prune() == 2);  // completed and cancelled: 7 days by default
    CHECK_FALSE(f.exists(done));
    CHECK_FALSE(f.exists(cancelled));
    CHECK(testing::results_snapshot(f.store.connection(), done).empty());
    CHECK(f.exists(failed));
    CHECK(f.exists(discarded));

    f.clock.advance(30 * kDay);
    CHECK(f.prune() == 2);  // failed and discarded: 30 days
    CHECK_FALSE(f.exists(failed));
    CHECK_FALSE(f.exists(discarded));

    // Never: the pending job, the running one, the quarantined ones (one of which had finished).
    f.clock.advance(3650 * kDay);
    CHECK(f.prune() == 0);
    CHECK(f.state(waiting) == "pending");
    CHECK(f.state(held) == "assigned");
    CHECK(f.state(set_aside) == "quarantined");
    CHECK(f.state(set_aside_done) == "quarantined");
    CHECK(testing::results_snapshot(f.store.connection(), set_aside_done) != "");

    // The ledger names exactly the pruned ids, by organization and state; their events stay.
    CHECK(f.scalar("SELECT sum(completed) FROM job_prunes") == 2);
    CHECK(f.scalar("SELECT sum(cancelled) + sum(failed) + sum(discarded) FROM job_prunes") == 3);
    CHECK(f.scalar("SELECT sum(results) FROM job_prunes") == 2);
    for (const JobId id : {fast, done, failed, discarded, cancelled}) {
        CHECK(f.scalar("SELECT count(*) FROM job_prunes WHERE jobs @> " + std::to_string(id) +
                       "::bigint") == 1);
        CHECK(testing::event_count(f.store.connection(), id, "enqueued") == 1);
    }
    CHECK(f.scalar("SELECT count(*) FROM job_prunes WHERE jobs @> " + std::to_string(waiting) +
                   "::bigint") == 0);
    // The ledger is append-only, as the audit log.
    {
        pqxx::work txn(*f.ops_conn);
        CHECK_THROWS(txn.exec("DELETE FROM job_prunes"));
    }

    // The checker and recovery see the pruned jobs as absent, not lost.
    const auto report = f.check();
    testing::check_clean(report);
    CHECK(report.pruned == 5);
    CHECK(report.pruned_with_history == 5);
    auto conn = f.db.connect();
    const auto survey = ops::RecoveryStore(*conn).survey(f.clock.now());
    CHECK(survey.orphans.empty());
    CHECK(survey.pruned_with_events == 5);
}

TEST_CASE("a prune removes at most its batch, and a later retention change applies at once",
          "[retention]") {
    Fixture f;
    std::vector<JobId> ids;
    for (int i = 0; i < 25; ++i) ids.push_back(f.enqueue());
    const auto out = f.store.claim(1, {"w", 25, {"default"}}, kLease, f.clock.now());
    REQUIRE(out.leases.size() == 25);
    // Completed newest id first, 100 ms apart (within the lease): completion order is the reverse
    // of id and enqueue order, so a prune that took jobs by id or at random would keep the wrong
    // ones.
    std::vector<JobId> by_completion;
    for (auto it = out.leases.rbegin(); it != out.leases.rend(); ++it) {
        f.clock.advance(100ms);
        f.store.complete({1, it->job_id, it->generation, "w", "ref"}, f.clock.now());
        REQUIRE(f.state(it->job_id) == "completed");
        by_completion.push_back(it->job_id);
    }
    REQUIRE(by_completion.front() != ids.front());
    f.clock.advance(2 * kDay);
    CHECK(f.prune() == 0);
    ops::QueueSettings shorter;
    shorter.retain_completed = kDay;
    f.ops.configure(1, "default", shorter, "ops", f.clock.now());
    // Oldest first: after each batch exactly the jobs completed latest are left.
    const auto left_are_the_latest = [&](std::size_t pruned) {
        for (std::size_t i = 0; i < by_completion.size(); ++i) {
            INFO("job " << by_completion[i] << ", completed " << i + 1 << "th, after " << pruned
                        << " pruned");
            CHECK(f.exists(by_completion[i]) == (i >= pruned));
        }
    };
    CHECK(f.prune(10) == 10);
    left_are_the_latest(10);
    CHECK(f.prune(10) == 10);
    left_are_the_latest(20);
    CHECK(f.prune(10) == 5);
    CHECK(f.prune(10) == 0);
    CHECK(f.scalar("SELECT count(*) FROM jobs") == 0);
    CHECK(f.scalar("SELECT count(*) FROM job_prunes") == 3);
    // Forever keeps them however old they are.
    ops::QueueSettings forever;
    forever.retain_completed = ops::kRetainForever;
    f.ops.configure(1, "default", forever, "ops", f.clock.now());
    const JobId kept = f.finished("completed");
    f.clock.advance(100000 * kDay);
    CHECK(f.prune() == 0);
    CHECK(f.exists(kept));
    const auto queues = f.ops.queues(1);
    REQUIRE(queues.size() == 1);
    CHECK(queues[0].retain_completed == ops::kRetainForever);
    CHECK(queues[0].retain_failed == 30 * kDay);
}

TEST_CASE("a claim is not blocked while a prune batch holds its locks", "[retention][locks]") {
    Fixture f;
    std::vector<JobId> finished;
    for (int i = 0; i < 50; ++i) {
        finished.push_back(f.enqueue("old"));
        f.finish(finished.back(), "completed", "old");
    }
    // A limited queue makes the claim take its advisory locks (kClaimLocks) exclusive.
    ops::QueueSettings limited;
    limited.max_assigned = 5;
    f.ops.configure(1, "default", limited, "ops", f.clock.now());
    f.clock.advance(8 * kDay);
    const JobId pending = f.enqueue();
    const JobId other = f.enqueue();

    std::barrier sync(2);
    std::atomic<std::int64_t> removed{0};
    std::int64_t pruner_pid = 0;
    std::thread pruner([&] {
        auto conn = f.db.connect();
        {
            pqxx::nontransaction s(*conn);
            pruner_pid = s.exec1("SELECT pg_backend_pid()")[0].as<std::int64_t>();
            s.exec("SELECT pg_advisory_lock(hashtextextended('aclaim retention', 0))");
        }
        pqxx::work txn(*conn);
        txn.exec("SET LOCAL aclaim.org_id = 'system'");
        removed = txn.exec_params1(
                         "SELECT coalesce(sum(completed), 0) FROM aclaim_prune_jobs($1, "
                         "1000)",
                         f.clock.now())[0]
                      .as<std::int64_t>();
        sync.arrive_and_wait();  // the batch is done and its transaction still open
        sync.arrive_and_wait();  // the claims ran meanwhile
        txn.commit();
    });
    sync.arrive_and_wait();
    CHECK(removed == 50);
    {
        // The open batch holds row locks on finished rows and no advisory lock but the
        // retention lock.
        pqxx::work txn(*f.ops_conn);
        CHECK(txn.exec_params1("SELECT count(*) FROM pg_locks WHERE pid = $1 AND locktype = "
                               "'advisory'",
                               pruner_pid)[0]
                  .as<int>() == 1);
    }
    {
        // A lock wait here fails fast rather than hanging the test.
        pqxx::nontransaction s(f.store.connection());
        s.exec("SET lock_timeout = '2s'");
        s.exec("SET statement_timeout = '5s'");
    }
    // Everything between the barriers is caught, so that the pruner is always let go.
    auto took = std::chrono::steady_clock::duration::max();
    std::size_t claimed = 0;
    try {
        const auto started = std::chrono::steady_clock::now();
        const auto out = f.store.claim(1, {"w2", 2, {"default"}}, kLease, f.clock.now());
        took = std::chrono::steady_clock::now() - started;
        claimed = out.leases.size();
        if (claimed == 2) {
            CHECK(out.leases[0].job_id == pending);
            CHECK(out.leases[1].job_id == other);
            const store::TransitionRequest t{1, pending, out.leases[0].generation, "w2", "ref"};
            CHECK(f.store.renew(t, kLease, f.clock.now()).accepted());
            CHECK(f.store.complete(t, f.clock.now()).accepted());
        }
        // An enqueue and a pause (which takes the organization's queue lock exclusive) go on.
        f.enqueue();
        f.ops.pause(1, "default", true, "ops", "check", f.clock);
    } catch (const std::exception& e) {
        FAIL_CHECK("blocked or failed while the prune batch was open: " << e.what());
    }
    sync.arrive_and_wait();
    pruner.join();
    CHECK(claimed == 2);
    CHECK(took < 2s);
    CHECK(f.scalar("SELECT count(*) FROM jobs WHERE queue = 'old'") == 0);
    testing::check_clean(f.check());
}

TEST_CASE("one coordinator at a time prunes, and its pass keeps partitions ahead",
          "[retention][coordinator]") {
    Fixture f;
    for (int i = 0; i < 7; ++i) f.finished("completed");
    f.clock.advance(8 * kDay);
    coordinator::RetentionOptions options;
    options.retention_batch = 3;
    options.retention_pause_ms = 0;
    options.partitions_ahead = 2;
    coordinator::ConnectionOptions connection;
    connection.dsn = f.db.dsn();
    connection.db_deadline_ms = 5000;
    coordinator::Metrics metrics;
    coordinator::StatementWatchdog watchdog(f.clock);
    const coordinator::Connections connections(connection, watchdog);
    coordinator::Retention retention(options, connections, f.clock, metrics);

    AssignmentStore other(f.db.dsn());
    REQUIRE(other.try_retention_lock());
    const auto idle = retention.pass(f.store);
    CHECK_FALSE(idle.held_lock);
    CHECK(f.scalar("SELECT count(*) FROM jobs") == 7);
    CHECK(metrics.retention_passes_idle.load() == 1);
    other.release_retention_lock();

    // A refused park callback counted 40 days ago is past its keep; one counted now is not.
    for (const auto at : {f.clock.now() - 40 * kDay, f.clock.now()}) {
        pqxx::work txn(f.store.connection());
        txn.exec_params("SELECT * FROM aclaim_finish_parked($1, 'completed', 'x', now_us => $2)",
                        std::string(64, 'e'), base::to_micros(at));
        txn.commit();
    }
    const auto ran = retention.pass(f.store);
    CHECK(ran.held_lock);
    CHECK(ran.park_refusals_pruned == 1);
    CHECK(f.scalar("SELECT count(*) FROM park_refusal_counts") == 1);
    CHECK(ran.pruned.completed == 7);
    CHECK(ran.pruned.results == 7);
    CHECK(ran.batches == 3);
    CHECK(metrics.pruned_jobs[coordinator::Metrics::PrunedState::Completed].load() == 7);
    CHECK(metrics.pruned_results.load() == 7);
    CHECK(metrics.retention_passes.load() == 1);
    // The lock is given back after the pass.
    CHECK(other.try_retention_lock());
    other.release_retention_lock();

    // A clock two years on: the pass creates that month's partition and two more.
    f.clock.set(base::SystemClock().now() + 730 * kDay);
    const auto later = retention.pass(f.store);
    CHECK(later.partitions_created.size() == 3);
    CHECK(metrics.partitions_created.load() == 3);
    const auto summary = f.store.partition_summary();
    REQUIRE(summary.covered_until);
    CHECK(*summary.covered_until > f.clock.now() + 59 * kDay);
    CHECK(metrics.partitions[coordinator::Metrics::PartitionState::Attached].load() ==
          summary.attached);
    CHECK(retention.pass(f.store).partitions_created.empty());
    // Events stamped then land in their month.
    f.enqueue();
    CHECK(f.scalar("SELECT count(*) FROM job_events WHERE tableoid = to_regclass('" +
                   later.partitions_created[0] + "')") == 1);
}

TEST_CASE(
    "old job_events partitions are archived, read back and dropped, never while a job "
    "that exists has events in them",
    "[retention][partitions]") {
    Fixture f;
    const JobId a = f.finished("completed");
    f.finished("failed");
    const JobId live = f.enqueue();
    // kT0 lies before every monthly partition: these events are in the legacy partition, whose
    // upper bound is the month the template database was migrated in.
    ops::RetentionStore retention(*f.ops_conn);
    const auto before = retention.partitions();
    REQUIRE_FALSE(before.empty());
    REQUIRE(before[0].name == "job_events_legacy");
    const Instant legacy_end = before[0].to;
    const auto dir =
        std::filesystem::temp_directory_path() / ("aclaim_archive_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    ops::ArchiveOptions options;
    options.dir = dir.string();
    options.older_than = kDay;
    const Instant archive_at = legacy_end + 2 * kDay;

    // Held: jobs a, b and the pending one still exist.
    auto out = retention.archive(options, archive_at);
    REQUIRE(out.size() == 1);
    CHECK(out[0].action == "held");
    CHECK(out[0].detail.find(std::to_string(live)) != std::string::npos);

    // The pending job is cancelled and everything is pruned; a dry run changes nothing.
    f.ops.cancel({live}, "ops", "done", f.clock.now());
    f.clock.advance(31 * kDay);
    CHECK(f.prune() == 3);
    options.dry_run = true;
    out = retention.archive(options, archive_at);
    REQUIRE(out.size() == 1);
    CHECK(out[0].action == "would_archive");
    CHECK(f.scalar("SELECT count(*) FROM job_events_legacy") > 0);

    const std::int64_t events = f.scalar("SELECT count(*) FROM job_events");
    options.dry_run = false;
    out = retention.archive(options, archive_at);
    REQUIRE(out.size() == 1);
    INFO(out[0].detail);
    CHECK(out[0].action == "archived");
    CHECK(out[0].rows == events);
    CHECK(f.scalar("SELECT count(*) FROM pg_class WHERE relname = 'job_events_legacy'") == 0);
    CHECK(f.scalar("SELECT count(*) FROM job_event_partitions WHERE name = 'job_events_legacy' "
                   "AND state = 'dropped' AND rows = " +
                   std::to_string(events) + "") == 1);

    // The archive reads back, every event, verified.
    std::ifstream in(out[0].file);
    std::vector<store::AuditEvent> read;
    const auto contents = ops::read_archive(in, [&](const auto& e) { read.push_back(e); });
    CHECK(contents.summary.rows == events);
    CHECK(contents.header.partition == "job_events_legacy");
    CHECK_FALSE(contents.header.from);
    REQUIRE_FALSE(read.empty());
    CHECK(read.front().job_id == a);
    CHECK(read.front().kind == "enqueued");

    // An archived month is never made again, even for a clock that went back into it.
    CHECK(f.store.ensure_event_partitions(kT0, 1).empty());

    // Nothing lost: the pruned jobs are absent; a job enqueued now is whole.
    f.clock.set(base::SystemClock().now());
    const JobId fresh = f.enqueue();
    CHECK(f.state(fresh) == "pending");
    const auto report = f.check();
    testing::check_clean(report);
    CHECK(report.pruned == 3);
    CHECK(report.pruned_with_history == 0);
    std::filesystem::remove_all(dir);
}

TEST_CASE(
    "a partition with events of a job that has neither a row nor a prune record is not "
    "archived",
    "[retention][partitions]") {
    Fixture f;
    const JobId a = f.finished("completed");
    {
        // Removed behind retention's back: the checker calls it lost, and so does the archive.
        pqxx::work txn(*f.ops_conn);
        txn.exec_params("DELETE FROM job_outcomes WHERE job_id = $1", a);
        txn.exec_params("DELETE FROM jobs WHERE id = $1", a);
        txn.commit();
    }
    ops::RetentionStore retention(*f.ops_conn);
    ops::ArchiveOptions options;
    options.dir = (std::filesystem::temp_directory_path() / "aclaim_never_written").string();
    options.older_than = kDay;
    const auto out = retention.archive(options, retention.partitions().at(0).to + 2 * kDay);
    REQUIRE(out.size() == 1);
    CHECK(out[0].action == "unaccounted");
    CHECK(out[0].detail.find(std::to_string(a)) != std::string::npos);
    CHECK(f.scalar("SELECT count(*) FROM pg_inherits WHERE inhrelid = "
                   "'job_events_legacy'::regclass") == 1);
    const auto report = f.check();
    CHECK_FALSE(report.ok());
}

TEST_CASE("aclaimctl sets a queue's retention, previews, prunes, reports and names a pruned job",
          "[retention][ctl]") {
    Fixture f;
    // Finished a month ago by the system clock, which aclaimctl reads.
    f.clock.set(base::SystemClock().now() - 30 * kDay);
    const JobId old = f.finished("completed");
    const JobId kept = f.enqueue("keep");
    f.finish(kept, "completed", "keep");
    auto r =
        testing::run_ctl(f.db.dsn(), {"queue", "set", "keep", "--org", "1", "--retain-completed",
                                      "forever", "--retain-failed", "12h"});
    REQUIRE(r.code == 0);
    r = testing::run_ctl(f.db.dsn(), {"queue", "list", "--org", "1"});
    CHECK(r.out.find("forever/12h00m/30d00h/7d00h") != std::string::npos);
    r = testing::run_ctl(f.db.dsn(),
                         {"queue", "set", "keep", "--org", "1", "--retain-failed", "10ms"});
    CHECK(r.code == 2);
    r = testing::run_ctl(f.db.dsn(), {"retention", "run", "--dry-run"});
    REQUIRE(r.code == 0);
    CHECK(r.out.find("would remove 1 finished jobs") != std::string::npos);
    CHECK(f.exists(old));
    r = testing::run_ctl(f.db.dsn(), {"retention", "run"});
    REQUIRE(r.code == 0);
    CHECK(r.out.find("pruned 1 finished jobs (1 completed") != std::string::npos);
    CHECK_FALSE(f.exists(old));
    CHECK(f.exists(kept));
    r = testing::run_ctl(f.db.dsn(), {"inspect", std::to_string(old)});
    CHECK(r.code == 2);
    CHECK(r.err.find("removed by retention") != std::string::npos);
    r = testing::run_ctl(f.db.dsn(), {"retention", "status"});
    REQUIRE(r.code == 0);
    CHECK(r.out.find("org 1: 1 completed") != std::string::npos);
    CHECK(r.out.find("job_events_legacy") != std::string::npos);
    r = testing::run_ctl(f.db.dsn(), {"check"});
    CHECK(r.code == 0);
    CHECK(r.out.find("pruned by retention 1") != std::string::npos);
    // While a coordinator holds the retention lock, a pass by hand does nothing.
    REQUIRE(f.store.try_retention_lock());
    r = testing::run_ctl(f.db.dsn(), {"retention", "run"});
    CHECK(r.code == 3);
    f.store.release_retention_lock();
}

TEST_CASE("a verdict a consumer group has not acknowledged keeps its job from being pruned",
          "[retention][integration]") {
    Fixture f;
    {
        pqxx::work txn(*f.ops_conn);
        txn.exec("SELECT * FROM aclaim_results_group_create('billing', 'earliest', 1)");
        txn.commit();
    }
    const JobId done = f.finished("completed");
    // Organization 2 has no consumer group: its verdicts wait for nobody.
    NewJob other;
    other.payload = "review";
    const JobId elsewhere = f.store.enqueue(2, {other}, f.clock.now()).at(0);
    {
        const auto out = f.store.claim(2, {"w", 1}, kLease, f.clock.now());
        REQUIRE(out.leases.size() == 1);
        f.store.complete({2, elsewhere, out.leases[0].generation, "w", "ref"}, f.clock.now());
    }
    const auto outcomes_of = [&](JobId id) {
        return f.scalar("SELECT count(*) FROM job_outcomes WHERE job_id = " + std::to_string(id));
    };
    REQUIRE(outcomes_of(done) == 1);
    REQUIRE(outcomes_of(elsewhere) == 1);

    f.clock.advance(8 * kDay);
    CHECK(f.prune() == 1);
    CHECK_FALSE(f.exists(elsewhere));
    CHECK(outcomes_of(elsewhere) == 0);
    CHECK(f.exists(done));
    CHECK(outcomes_of(done) == 1);

    // Fetched is not enough: only the acknowledgement lets it go.
    std::int64_t seq = 0;
    {
        pqxx::work txn(*f.ops_conn);
        const auto rows =
            txn.exec("SELECT seq, job_id FROM aclaim_results_fetch('billing', 10, 1)");
        REQUIRE(rows.size() == 1);
        CHECK(rows[0][1].as<JobId>() == done);
        seq = rows[0][0].as<std::int64_t>();
        txn.commit();
    }
    CHECK(f.prune() == 0);
    {
        pqxx::work txn(*f.ops_conn);
        txn.exec_params("SELECT aclaim_results_ack('billing', $1, 1)", seq);
        txn.commit();
    }
    CHECK(f.prune() == 1);
    CHECK_FALSE(f.exists(done));
    CHECK(outcomes_of(done) == 0);
    testing::check_clean(f.check());
}
