// aclaim-worker: a simulated reviewer. See worker/options.cpp for flags, docs/protocol.md for
// what it says on the wire.

#include <signal.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdio>
#include <zmq.hpp>

#include "common/base/logging.hpp"
#include "worker/options.hpp"
#include "worker/simulator.hpp"

namespace {

std::atomic<bool> g_stop{false};
static_assert(std::atomic<bool>::is_always_lock_free, "set from a signal handler");

extern "C" void on_stop_signal(int) {
    g_stop.store(true);
}

void install_stop_handlers() {
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    // No SA_RESTART: the signal must cut the socket wait short so the worker winds down now.
    sa.sa_flags = 0;
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);
}

}  // namespace

int main(int argc, char** argv) {
    auto options = aclaim::worker::parse_options(argc, argv);
    try {
        aclaim::base::setup_logging("aclaim-worker", options.log_level);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "aclaim-worker: %s\n", e.what());
        return 2;
    }
    install_stop_handlers();
    try {
        zmq::context_t context;
        aclaim::worker::Simulator simulator(context, std::move(options), g_stop);
        return simulator.run();
    } catch (const std::exception& e) {
        spdlog::critical("aclaim-worker: {}", e.what());
        return 1;
    }
}
