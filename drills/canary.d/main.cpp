// aclaim-canary: the load-shaped canary behind drills/canary. See drills/canary.d/contract.md.
// Exit status: 0 the contract held, 1 it was violated (the canary backed off), 2 the canary could
// not run or could not measure everything it promised.

#include <signal.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "drills/canary.d/report.hpp"
#include "drills/canary.d/run.hpp"

namespace {

using namespace aclaim::drills;

/// Turns SIGINT/SIGTERM into a stop request, from a thread of its own: the run then ends at the
/// next interval boundary and still writes its report.
class StopOnSignal {
  public:
    explicit StopOnSignal(std::atomic<bool>& stop) : stop_(stop), set_() {
        sigemptyset(&set_);
        sigaddset(&set_, SIGINT);
        sigaddset(&set_, SIGTERM);
        pthread_sigmask(SIG_BLOCK, &set_, nullptr);
        thread_ = std::thread([this] {
            while (!done_.load()) {
                const timespec step{0, 100'000'000};
                if (sigtimedwait(&set_, nullptr, &step) > 0) stop_.store(true);
            }
        });
    }
    ~StopOnSignal() {
        done_.store(true);
        thread_.join();
    }

  private:
    std::atomic<bool>& stop_;
    std::atomic<bool> done_{false};
    sigset_t set_;
    std::thread thread_;
};

}  // namespace

int main(int argc, char** argv) {
    const CanaryOptions options = parse_canary_options(argc, argv);
    std::error_code ec;
    std::filesystem::create_directories(options.out, ec);
    if (ec) {
        std::fprintf(stderr, "aclaim-canary: cannot create %s: %s\n", options.out.c_str(),
                     ec.message().c_str());
        return 2;
    }
    // The worker client logs reconnects and refusals; they belong in a file, not over the
    // progress line.
    auto logger = spdlog::basic_logger_mt("canary", options.out + "/canary.log", true);
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %l %v");
    logger->flush_on(spdlog::level::warn);
    spdlog::set_default_logger(logger);
    spdlog::set_level(spdlog::level::info);

    // Blocked before any thread starts, so that every thread inherits the mask.
    std::atomic<bool> stop{false};
    StopOnSignal signals(stop);
    const bool tty = ::isatty(STDOUT_FILENO) == 1;
    const auto progress = [tty](const RunResult& run, const Interval& in) {
        const auto line = progress_line(run, in);
        if (tty && in.violations.empty()) {
            std::printf("\r\033[K%s", line.c_str());
        } else {
            std::printf("%s%s\n", tty ? "\r\033[K" : "", line.c_str());
        }
        std::fflush(stdout);
    };

    std::printf("aclaim-canary: %s shape, %d..%d pollers, %d s, %s; report in %s\n",
                std::string(to_string(options.shape)).c_str(), options.start_pollers,
                options.max_pollers, options.seconds, options.plaintext ? "plaintext" : "CURVE",
                options.out.c_str());
    std::fflush(stdout);
    RunResult run;
    try {
        run = run_canary(options, stop, progress);
    } catch (const std::exception& e) {
        if (tty) std::printf("\n");
        std::fprintf(stderr, "aclaim-canary: cannot run: %s\n", e.what());
        spdlog::error("cannot run: {}", e.what());
        return 2;
    }
    if (tty) std::printf("\r\033[K");
    try {
        write_report(run, options.out);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "aclaim-canary: %s\n", e.what());
        return 2;
    }
    const auto& t = run.seen_total;
    std::printf(
        "%s: %lld claims in %.1f s, claim p99 %.1f ms, displacement p99 %lld (bound "
        "%lld), %zu violations, %zu problems\n",
        run.verdict().c_str(), static_cast<long long>(t.jobs_assigned), run.seconds_run,
        run.claim_latency_total.p99_ms, static_cast<long long>(run.facts.displacement.p99),
        static_cast<long long>(run.bounds.displacement_bound(run.facts.max_pollers)),
        run.violations.size(), run.problems.size());
    for (const auto& v : run.violations) {
        std::printf("  violation %s%s at %s: %s\n", v.rule.c_str(), v.injected ? " (injected)" : "",
                    v.second < 0 ? "the end" : ("second " + std::to_string(v.second)).c_str(),
                    v.evidence.c_str());
    }
    for (const auto& p : run.problems) std::printf("  problem: %s\n", p.c_str());
    std::printf("report: %s/report.md\n", options.out.c_str());
    std::printf("%s\n", kNoGuarantee);
    return run.exit_code();
}
