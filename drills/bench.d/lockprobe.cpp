// aclaim-lockprobe: measures how far SKIP LOCKED (or nowait / wait) claims land from strict claim
// order when k claimers compete, on a real PostgreSQL. The product claims with SKIP LOCKED only;
// the nowait and wait variants of its claim statement live here, for the comparison. For each k it
// fills a fresh organization with jobs of equal priority and enqueue time (so strict order is id
// order), lets k threads released together claim one job at a time until the queue is empty, and
// reads the order of the claims back from job_events. A claim's displacement is the number of
// better-ranked jobs still unclaimed when it was taken. It exits 1 when a run did not claim every
// job exactly once and complete it: its figures would then describe something else.

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <thread>

#include "common/base/program.hpp"
#include "common/base/queue_name.hpp"
#include "common/proto/version.hpp"
#include "common/store/assignment_store.hpp"
#include "common/store/claim_plan.hpp"
#include "common/store/claim_sql.hpp"
#include "common/store/migrations.hpp"
#include "common/store/pg_array.hpp"
#include "common/store/pg_time.hpp"
#include "common/store/session_sql.hpp"

using namespace aclaim;

namespace {

/// What a claim does when a candidate row is locked by another transaction.
enum class LockStrategy {
    SkipLocked,  ///< pass over it and take the next eligible one: the product's claim
    NoWait,      ///< fail at once (SQLSTATE 55P03)
    Wait,        ///< wait for it, bounded by kLockTimeoutMs, then fail (55P03)
};

std::optional<LockStrategy> parse_lock_strategy(std::string_view s) {
    if (s == "skip_locked") return LockStrategy::SkipLocked;
    if (s == "nowait") return LockStrategy::NoWait;
    if (s == "wait") return LockStrategy::Wait;
    return std::nullopt;
}

constexpr const char* kLockNotAvailable = "55P03";
constexpr int kLockTimeoutMs = 2000;
constexpr const char* kVariantName = "lockprobe_claim";
constexpr base::Duration kLease = 60 * base::kSeconds;

/// The store's claim of queues without limits, rates, weights or exclusions, its candidates
/// locked as `strategy` says.
std::string claim_variant(LockStrategy strategy) {
    std::string text = store::sql::claim_statement(store::ClaimPlan{}).text;
    const std::string_view skip = "FOR UPDATE SKIP LOCKED";
    const std::string_view lock =
        strategy == LockStrategy::NoWait ? "FOR UPDATE NOWAIT" : "FOR UPDATE";
    const auto at = text.find(skip);
    if (at == std::string::npos)
        throw std::logic_error("the claim no longer locks FOR UPDATE SKIP LOCKED");
    return text.replace(at, skip.size(), lock);
}

/// One claim of one job, as the store runs it (its locks, then its statement) but with the
/// variant; nullopt when a candidate's lock stopped it.
std::optional<store::ClaimOutcome> claim_with_variant(store::AssignmentStore& store,
                                                      LockStrategy strategy, store::OrgId org,
                                                      const std::string& worker) {
    const std::string queues =
        store::pg_array(std::vector<std::string>{std::string(base::kDefaultQueue)});
    try {
        pqxx::work txn(store.connection(), "lockprobe_claim");
        txn.exec_prepared(store::sql::kClaimLocks.name, org, queues);
        if (strategy == LockStrategy::Wait) {
            txn.exec_params(store::sql::kSetLocalLockTimeout.text, std::to_string(kLockTimeoutMs));
        }
        const pqxx::result r = txn.exec_prepared(kVariantName, org, worker, 1,
                                                 base::instant_from_micros(2), kLease, queues);
        txn.commit();
        store::ClaimOutcome out;
        for (const auto& row : r) {
            store::Lease lease;
            lease.job_id = row["id"].as<store::JobId>();
            lease.org_id = org;
            lease.generation = row["generation"].as<store::Generation>();
            out.leases.push_back(std::move(lease));
        }
        out.status = out.leases.empty() ? store::ClaimOutcome::Status::NoWork
                                        : store::ClaimOutcome::Status::Claimed;
        return out;
    } catch (const pqxx::sql_error& e) {
        if (e.sqlstate() != kLockNotAvailable) throw;
        return std::nullopt;
    }
}

struct Result {
    int claimers = 0;
    long claims = 0;
    long locked_outcomes = 0;  // nowait: a candidate locked; wait: the lock timeout passed
    double seconds = 0;
    double mean = 0;
    long p50 = 0, p99 = 0, max = 0;
    double displaced_share = 0;
    // What a displacement figure rests on: every job claimed once and completed, none twice.
    long distinct_claimed = 0;
    long completed = 0;
};

/// One measurement: `claimers` threads drain `jobs` jobs of a fresh organization.
struct Run {
    int claimers = 0;
    int jobs = 0;
    store::OrgId org = 0;
};

Result probe(const std::string& dsn, LockStrategy strategy, const Run& run) {
    const int k = run.claimers;
    const int n_jobs = run.jobs;
    const store::OrgId org = run.org;
    store::StoreOptions opts;
    opts.application_name = "aclaim-lockprobe";
    {
        store::AssignmentStore seed(dsn);
        std::vector<store::NewJob> jobs(static_cast<std::size_t>(n_jobs), {0, "probe", 3});
        seed.enqueue(org, jobs, base::instant_from_micros(1));
    }
    std::barrier start(k);
    std::atomic<long> locked{0};
    std::vector<std::thread> threads;
    threads.reserve(static_cast<std::size_t>(k));
    const auto t0 = std::chrono::steady_clock::now();
    for (int c = 0; c < k; ++c) {
        threads.emplace_back([&, c] {
            store::AssignmentStore s(dsn, opts);
            if (strategy != LockStrategy::SkipLocked) {
                s.connection().prepare(kVariantName, claim_variant(strategy));
            }
            const std::string me = "probe-" + std::to_string(c);
            start.arrive_and_wait();
            int empty_in_a_row = 0;
            while (empty_in_a_row < 3) {
                const auto claimed =
                    strategy == LockStrategy::SkipLocked
                        ? std::optional(s.claim(org, {me, 1}, kLease, base::instant_from_micros(2)))
                        : claim_with_variant(s, strategy, org, me);
                if (!claimed) {
                    ++locked;
                    continue;
                }
                const store::ClaimOutcome& out = *claimed;
                if (out.status == store::ClaimOutcome::Status::Claimed) {
                    empty_in_a_row = 0;
                    const auto& l = out.leases[0];
                    s.complete({org, l.job_id, l.generation, me, "ok"},
                               base::instant_from_micros(3));
                } else {
                    ++empty_in_a_row;
                }
            }
        });
    }
    for (auto& t : threads) t.join();
    Result r;
    r.claimers = k;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.locked_outcomes = locked;

    pqxx::connection conn(dsn);
    pqxx::read_transaction txn(conn);
    // Claim order is the order of the claimed events; rank is the job id.
    const auto rows = txn.exec_params(
        "SELECT job_id FROM job_events WHERE org_id = $1 AND kind = 'claimed' ORDER BY id", org);
    std::vector<long> order;
    for (const auto& row : rows) order.push_back(row[0].as<long>());
    std::vector<long> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    r.distinct_claimed =
        static_cast<long>(std::unique(sorted.begin(), sorted.end()) - sorted.begin());
    sorted.resize(static_cast<std::size_t>(r.distinct_claimed));
    const auto done = txn.exec_params1(
        "SELECT count(*) FROM jobs WHERE org_id = $1 AND state = 'completed'", org);
    r.completed = done[0].as<long>();
    // Fenwick tree over ranks: how many better-ranked jobs were still unclaimed at each claim.
    const std::size_t n = order.size();
    std::vector<long> tree(n + 1, 0);
    auto add = [&](std::size_t i) {
        for (++i; i <= n; i += i & -i) ++tree[i];
    };
    auto prefix = [&](std::size_t i) {
        long s = 0;
        for (; i > 0; i -= i & -i) s += tree[i];
        return s;
    };
    std::vector<long> displacement;
    for (long id : order) {
        const auto rank = static_cast<std::size_t>(
            std::lower_bound(sorted.begin(), sorted.end(), id) - sorted.begin());
        displacement.push_back(static_cast<long>(rank) - prefix(rank));
        add(rank);
    }
    r.claims = static_cast<long>(n);
    if (n) {
        std::vector<long> d = displacement;
        std::sort(d.begin(), d.end());
        double sum = 0;
        long displaced = 0;
        for (long x : d) {
            sum += static_cast<double>(x);
            displaced += x > 0;
        }
        r.mean = sum / static_cast<double>(n);
        r.p50 = d[n / 2];
        r.p99 = d[std::min(n - 1, n * 99 / 100)];
        r.max = d.back();
        r.displaced_share = static_cast<double>(displaced) / static_cast<double>(n);
    }
    return r;
}

}  // namespace

int run_main(int argc, char** argv) {
    CLI::App app{"aclaim-lockprobe: claim-order displacement under concurrent claimers"};
    app.set_version_flag("--version", proto::version_line("aclaim-lockprobe"));
    std::string dsn, strategy_name = "skip_locked", json_path;
    std::vector<int> claimers{2, 4, 16};
    int jobs = 2000;
    app.add_option("--dsn", dsn, "PostgreSQL address")->envname("ACLAIM_DSN")->required();
    app.add_option("--claimers", claimers, "Claimer counts to measure")->delimiter(',');
    app.add_option("--jobs", jobs, "Jobs per measurement")->check(CLI::Range(10, 1000000));
    app.add_option("--lock-strategy", strategy_name, "skip_locked, nowait or wait");
    app.add_option("--json", json_path, "Also write the results as JSON to this file");
    CLI11_PARSE(app, argc, argv);
    const auto strategy = parse_lock_strategy(strategy_name);
    if (!strategy) {
        std::fprintf(stderr, "aclaim-lockprobe: unknown lock strategy '%s'\n",
                     strategy_name.c_str());
        return 2;
    }
    {
        pqxx::connection conn(dsn);
        store::migrate(conn);
    }
    nlohmann::json out = nlohmann::json::array();
    std::printf("strategy %s, %d jobs per run, one job per claim, claim+complete per loop\n",
                strategy_name.c_str(), jobs);
    std::printf("%9s %8s %9s %8s %6s %6s %6s %10s %10s\n", "claimers", "claims", "jobs/s", "mean",
                "p50", "p99", "max", "displaced", "locked");
    store::OrgId org = 100000 + static_cast<store::OrgId>(::getpid()) * 100;
    int failures = 0;
    for (int k : claimers) {
        const auto r = probe(dsn, *strategy, {k, jobs, ++org});
        std::printf("%9d %8ld %9.0f %8.2f %6ld %6ld %6ld %9.1f%% %10ld\n", r.claimers, r.claims,
                    static_cast<double>(r.claims) / r.seconds, r.mean, r.p50, r.p99, r.max,
                    100 * r.displaced_share, r.locked_outcomes);
        // A probe that lost jobs or handed one out twice measured something other than claim
        // order: its figures must not reach docs/contention.md, and the drill must fail.
        if (r.claims != jobs || r.distinct_claimed != jobs || r.completed != jobs) {
            std::printf(
                "FAIL %d claimers: %ld claims of %ld distinct jobs, %ld completed, for %d "
                "jobs (each must be claimed exactly once and completed)\n",
                k, r.claims, r.distinct_claimed, r.completed, jobs);
            ++failures;
        }
        out.push_back({{"strategy", strategy_name},
                       {"claimers", k},
                       {"claims", r.claims},
                       {"jobs_per_s", static_cast<double>(r.claims) / r.seconds},
                       {"displacement_mean", r.mean},
                       {"displacement_p50", r.p50},
                       {"displacement_p99", r.p99},
                       {"displacement_max", r.max},
                       {"displaced_share", r.displaced_share},
                       {"locked_outcomes", r.locked_outcomes}});
    }
    if (!json_path.empty()) {
        FILE* f = std::fopen(json_path.c_str(), "w");
        if (!f) {
            std::perror(json_path.c_str());
            return 1;
        }
        std::fputs(out.dump(2).c_str(), f);
        std::fclose(f);
    }
    return failures == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
    return aclaim::base::run_program("aclaim-lockprobe", run_main, argc, argv);
}
