#include "coordinator/router/accept_monitor.hpp"

#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <zmq_addon.hpp>

namespace aclaim::coordinator {

namespace {

/// One inproc name per monitored socket in the process (tests run several coordinators).
std::string monitor_endpoint(const zmq::socket_t& router) {
    return "inproc://aclaim-accept-monitor-" +
           std::to_string(reinterpret_cast<std::uintptr_t>(router.handle()));
}

}  // namespace

std::size_t ConnectionBudget::capacity_for(std::uint64_t descriptor_limit) {
    const std::uint64_t own = std::min(kOwnDescriptors, descriptor_limit / 4);
    return static_cast<std::size_t>(descriptor_limit - own);
}

std::uint64_t ConnectionBudget::descriptor_limit() {
    rlimit limit{};
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) {
        return static_cast<std::uint64_t>(-1) / 2;
    }
    return static_cast<std::uint64_t>(limit.rlim_cur);
}

void ConnectionBudget::set_has_sessions(store::OrgId org, const std::string& name, bool any) {
    std::lock_guard lock(mutex_);
    if (any) {
        with_sessions_.emplace(org, name);
    } else {
        with_sessions_.erase({org, name});
    }
}

bool ConnectionBudget::admits(store::OrgId org, const std::string& name) {
    if (!crowded()) return true;
    {
        std::lock_guard lock(mutex_);
        if (with_sessions_.count({org, name}) == 0) return true;
    }
    if (metrics_ != nullptr) metrics_->count_limit(Metrics::TenantLimit::FdReserve);
    return false;
}

AcceptMonitor::AcceptMonitor(zmq::context_t& context, zmq::socket_t& router, Metrics& metrics,
                             const base::Clock& clock, ConnectionBudget* budget)
    : router_(router),
      metrics_(metrics),
      clock_(clock),
      budget_(budget),
      events_(context, zmq::socket_type::pair) {
    const auto endpoint = monitor_endpoint(router);
    if (zmq_socket_monitor(router.handle(), endpoint.c_str(),
                           ZMQ_EVENT_ACCEPT_FAILED | ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED) !=
        0) {
        throw zmq::error_t();
    }
    monitoring_ = true;
    events_.set(zmq::sockopt::linger, 0);
    // No high-water mark: a crowd connecting at once must not lose the events that count it (an
    // inproc pipe is unbounded when either end's mark is 0).
    events_.set(zmq::sockopt::rcvhwm, 0);
    events_.connect(endpoint);
}

AcceptMonitor::~AcceptMonitor() {
    stop();
}

void AcceptMonitor::stop() {
    if (!monitoring_) return;
    monitoring_ = false;
    // A null endpoint ends the monitoring; the pair socket then sees nothing more.
    zmq_socket_monitor(router_.handle(), nullptr, 0);
}

void AcceptMonitor::drain() {
    // Each event is two frames: 2 bytes of event id and 4 of value (accept()'s errno, or the
    // connection's descriptor), then the endpoint.
    while (true) {
        std::vector<zmq::message_t> frames;
        if (!zmq::recv_multipart(events_, std::back_inserter(frames), zmq::recv_flags::dontwait))
            break;
        if (frames.empty() || frames[0].size() < 6) continue;
        std::uint16_t event = 0;
        std::uint32_t value = 0;
        std::memcpy(&event, frames[0].data(), sizeof event);
        std::memcpy(&value, static_cast<const char*>(frames[0].data()) + 2, sizeof value);
        if (event == ZMQ_EVENT_ACCEPTED) {
            if (budget_ != nullptr) budget_->opened();
            continue;
        }
        if (event == ZMQ_EVENT_DISCONNECTED) {
            if (budget_ != nullptr) budget_->closed();
            closed_.push_back(static_cast<int>(value));
            continue;
        }
        if (event != ZMQ_EVENT_ACCEPT_FAILED) continue;
        metrics_.accept_failures.fetch_add(1, std::memory_order_relaxed);
        ++unreported_;
        last_errno_ = static_cast<int>(value);
    }
    const auto now = clock_.monotonic_now();
    if (unreported_ == 0 || now < next_report_) return;
    spdlog::warn(
        "cannot accept worker connections: {} ({} failed accepts since the last report); at the "
        "descriptor limit, raise it (LimitNOFILE=, ulimit -n); workers keep retrying",
        std::strerror(last_errno_), unreported_);
    unreported_ = 0;
    next_report_ = now + kReportEvery;
}

std::vector<int> AcceptMonitor::take_closed() {
    drain();
    return std::exchange(closed_, {});
}

}  // namespace aclaim::coordinator
