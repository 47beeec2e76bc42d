// What counting costs on the hot path: a counter increment and a histogram observation with the
// coordinator's own series (coordinator/metrics: relaxed atomics) against prometheus-cpp's, on one
// thread and with two threads writing the same series. Prints ns per operation per thread; the
// figures are in docs/performance.md ("Metrics cost"). Built only where prometheus-cpp is
// installed (Debian: prometheus-cpp-dev): the coordinator does not link it.

#include <prometheus/counter.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <thread>
#include <vector>

#include "common/base/program.hpp"
#include "common/proto/version.hpp"
#include "coordinator/metrics/metrics.hpp"

namespace {

using Clock = std::chrono::steady_clock;

/// The best of `rounds` runs of `ops` calls of `op` on each of `threads` threads: wall time per
/// call per thread, in nanoseconds. The best, because the machine is shared.
double measure(int threads, long ops, int rounds, const std::function<void(long)>& op) {
    double best = 1e18;
    for (int r = 0; r < rounds; ++r) {
        std::vector<std::thread> pool;
        pool.reserve(static_cast<std::size_t>(threads));
        const auto start = Clock::now();
        for (int t = 0; t < threads; ++t) {
            pool.emplace_back([&] {
                for (long i = 0; i < ops; ++i) op(i);
            });
        }
        for (auto& th : pool) th.join();
        const auto ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count();
        best = std::min(best, ns / static_cast<double>(ops));
    }
    return best;
}

int run(int argc, char** argv) {
    CLI::App app{"aclaim-metrics-cost: counter and histogram cost, own atomics vs prometheus-cpp"};
    app.set_version_flag("--version", aclaim::proto::version_line("aclaim-metrics-cost"));
    long ops = 20'000'000;
    int rounds = 5;
    app.add_option("--ops", ops, "operations per thread and round");
    app.add_option("--rounds", rounds, "rounds; the best is printed");
    CLI11_PARSE(app, argc, argv);

    using namespace aclaim::coordinator;
    Metrics own;
    prometheus::Registry registry;
    auto& counter =
        prometheus::BuildCounter().Name("aclaim_claims_total").Help("x").Register(registry).Add({});
    prometheus::Histogram::BucketBoundaries bounds;
    for (const auto us : Histogram::kBoundsUs) bounds.push_back(static_cast<double>(us) / 1e6);
    auto& histogram = prometheus::BuildHistogram()
                          .Name("aclaim_claim_duration_seconds")
                          .Help("x")
                          .Register(registry)
                          .Add({}, bounds);

    // Observed values spread over the buckets as claims are: mostly 1-25 ms.
    std::vector<std::chrono::microseconds> spread;
    for (const auto us : {300, 1'200, 2'000, 4'000, 7'000, 12'000, 20'000, 60'000}) {
        spread.emplace_back(us);
    }
    const auto pick = [&](long i) { return spread[static_cast<std::size_t>(i) % spread.size()]; };

    std::printf("%-34s %12s %12s\n", "ns per operation per thread", "1 thread", "2 threads");
    const auto row = [&](const char* what, const std::function<void(long)>& op) {
        const double one = measure(1, ops, rounds, op);
        const double two = measure(2, ops, rounds, op);
        std::printf("%-34s %12.1f %12.1f\n", what, one, two);
    };
    row("counter, atomics (coordinator)",
        [&](long) { own.claims.fetch_add(1, std::memory_order_relaxed); });
    row("counter, prometheus-cpp", [&](long) { counter.Increment(); });
    row("histogram, atomics (coordinator)", [&](long i) { own.claim_latency.observe(pick(i)); });
    row("histogram, prometheus-cpp",
        [&](long i) { histogram.Observe(std::chrono::duration<double>(pick(i)).count()); });
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    return aclaim::base::run_program("aclaim-metrics-cost", run, argc, argv);
}
