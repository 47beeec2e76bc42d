// aclaim-coordinator: parses settings, sets up logging and signals, and runs a Coordinator.

#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>

#include "common/base/cli_flags.hpp"
#include "common/base/clock.hpp"
#include "common/base/logging.hpp"
#include "common/base/program.hpp"
#include "common/base/stop_signals.hpp"
#include "common/proto/version.hpp"
#include "coordinator/http/http_server.hpp"
#include "coordinator/router/coordinator.hpp"

namespace {

using aclaim::coordinator::Coordinator;

/// Every worker connection holds a file descriptor, and the usual soft limit of 1,024 would cap a
/// coordinator near a thousand workers: the soft limit is raised to the hard one, which the
/// service manager sets (LimitNOFILE=, docker's ulimits: nofile; docs/operations.md).
void raise_fd_limit() {
    rlimit limit{};
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
    if (limit.rlim_cur < limit.rlim_max) {
        const rlim_t before = limit.rlim_cur;
        limit.rlim_cur = limit.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
            spdlog::warn("cannot raise the file descriptor limit from {} to {}: {}", before,
                         limit.rlim_max, std::strerror(errno));
            return;
        }
    }
    spdlog::info("file descriptor limit {}: room for about {} worker connections", limit.rlim_cur,
                 limit.rlim_cur > 64 ? limit.rlim_cur - 64 : 0);
}

int run(int argc, char** argv) {
    aclaim::coordinator::CoordinatorOptions options;
    CLI::App app{
        "aclaim coordinator: hands review jobs from PostgreSQL to reviewer workers over "
        "ZeroMQ, under leases and fencing generations"};
    app.set_version_flag("--version", aclaim::proto::version_line("aclaim-coordinator"));
    aclaim::coordinator::add_cli_options(app, options);
    if (const auto code = aclaim::base::parse_command_line(app, "aclaim-coordinator", argc, argv))
        return *code;

    try {
        aclaim::base::setup_logging("coordinator", options.log_level);
        options.validate();
        raise_fd_limit();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "aclaim-coordinator: %s\n", e.what());
        return 2;
    }

    // Blocked before any thread starts, so every thread inherits the mask and only the waiter
    // ever sees these signals.
    const sigset_t set = aclaim::base::block_stop_signals();

    std::unique_ptr<aclaim::base::Clock> clock;
    if (options.clock_skew_ms != 0) {
        spdlog::warn("clock skewed by {} ms", options.clock_skew_ms);
        clock = std::make_unique<aclaim::base::SkewedClock>(
            std::chrono::milliseconds(options.clock_skew_ms));
    } else {
        clock = std::make_unique<aclaim::base::SystemClock>();
    }

    try {
        Coordinator coordinator(options, *clock);
        std::unique_ptr<aclaim::coordinator::HttpServer> http;
        if (!options.http.http_bind.empty()) {
            http = std::make_unique<aclaim::coordinator::HttpServer>(options.http_endpoint(),
                                                                     coordinator.metrics(), *clock);
            try {
                http->start();
            } catch (const std::exception& e) {
                // Handing out jobs must not depend on the observability port: a taken port is
                // reported here and by the failing health check, and the workers keep working.
                spdlog::error("{}; serving without /metrics, /healthz and /readyz", e.what());
                http.reset();
            }
        }
        // The first signal drains the coordinator, a second one ends the process at once.
        aclaim::base::StopSignalWaiter signals(set, [&coordinator](int sig) {
            spdlog::info("{}: draining", strsignal(sig));
            coordinator.request_stop();
        });
        coordinator.run();
    } catch (const std::exception& e) {
        spdlog::critical("aclaim-coordinator: {}", e.what());
        return 1;
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    return aclaim::base::run_program("aclaim-coordinator", run, argc, argv);
}
