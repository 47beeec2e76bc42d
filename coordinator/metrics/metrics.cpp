#include "coordinator/metrics/metrics.hpp"

#include <algorithm>

namespace aclaim::coordinator::metrics {

static_assert(static_cast<std::size_t>(store::Rejection::Quarantined) + 1 ==
                  Metrics::kRejectionKinds,
              "one rejection counter per Rejection value");

namespace {

std::size_t error_index(std::string_view code) {
    const auto it = std::find(proto::errors::kCounted.begin(), proto::errors::kCounted.end(), code);
    return it == proto::errors::kCounted.end()
               ? proto::errors::kCounted.size() - 1
               : static_cast<std::size_t>(it - proto::errors::kCounted.begin());
}

}  // namespace

AuthCounters::AuthCounters(Registry& registry)
    : handshakes(registry, Type::Counter,
                 {"aclaim_auth_handshakes_total",
                  "CURVE handshakes answered by the ZAP handler, by outcome: accepted (a "
                  "live registered key), refused (unknown or revoked key), failed (the "
                  "key lookup failed).",
                  "outcome"}),
      accepted(handshakes, "accepted"),
      refused(handshakes, "refused"),
      failed(handshakes, "failed"),
      lookups(registry, {"aclaim_auth_key_lookups_total",
                         "worker_keys queries: handshake cache misses and re-checks of "
                         "open connections."}),
      sessions_revoked(registry, {"aclaim_auth_sessions_revoked_total",
                                  "Sessions cut off because their connection's key was "
                                  "revoked while it was open."}) {}

ResultNotifierCounters::ResultNotifierCounters(Registry& registry)
    : sent(registry, {"aclaim_result_notifier_sent_total",
                      "Notifications sent on the results channel after completions "
                      "committed, one per organization per round."}),
      failed_rounds(registry, {"aclaim_result_notifier_failed_rounds_total",
                               "Result notifier rounds that failed (connection or "
                               "statement); their organizations wait for the next."}) {}

NotificationCounters::NotificationCounters(Registry& registry)
    : forged(registry,
             {"aclaim_forged_notifications_total",
              "Notifications dropped, by channel: a malformed payload, or an aclaim_revoke "
              "that its job's row does not bear out (forged by any database login, or stale). "
              "None told a worker anything.",
              "channel"},
             kChannels),
      revocations_verified(registry, {"aclaim_revoke_notifications_verified_total",
                                      "aclaim_revoke notifications that their job's row bore "
                                      "out (a cancelled job's holder), passed on as REVOKED."}),
      check_latency(registry, {"aclaim_revoke_check_duration_seconds",
                               "The one statement that checks a batch of aclaim_revoke "
                               "notifications against their jobs' rows."}) {}

std::array<std::string_view, Metrics::kRejectionKinds> Metrics::rejection_names() {
    std::array<std::string_view, kRejectionKinds> names{};
    for (std::size_t i = 0; i < names.size(); ++i) {
        names[i] = store::to_string(static_cast<store::Rejection>(i));
    }
    return names;
}

Metrics::Metrics() {
    for (auto& p : partitions) p = -1;
}

void Metrics::count_rejection(store::Rejection r) {
    const auto i = static_cast<std::size_t>(r);
    if (i < rejections.size()) rejections[i].fetch_add(1, std::memory_order_relaxed);
}

void Metrics::count_error(std::string_view code) {
    errors[error_index(code)].fetch_add(1, std::memory_order_relaxed);
}

std::uint64_t Metrics::rejections_of(store::Rejection r) const {
    const auto i = static_cast<std::size_t>(r);
    return i < rejections.size() ? rejections[i].load() : 0;
}

std::uint64_t Metrics::errors_of(std::string_view code) const {
    return errors[error_index(code)].load();
}

std::string Metrics::summary() const {
    std::string out;
    auto add = [&out](std::string_view name, std::uint64_t v) {
        if (v == 0) return;
        if (!out.empty()) out += ' ';
        out += name;
        out += '=';
        out += std::to_string(v);
    };
    add("requests", requests.load());
    add("claims", claims.load());
    add("jobs_assigned", jobs_assigned.load());
    add("no_work", no_work.load());
    add("parked", parked.load());
    add("renewals", renewals.load());
    add("renew_messages", renew_messages.load());
    add("renew_jobs", renew_jobs.load());
    add("completions", completions.load());
    add("failures", failures.load());
    add("releases", releases.load());
    add("progress", progress_reports.load());
    add("replayed", replayed.load());
    add("reclaims", reclaims.load());
    add("revocations", revocations.load());
    add("replies_dropped", replies_dropped.load());
    add("accept_failures", accept_failures.load());
    add("db_deadline_answers", db_deadline_answers.load());
    add("mixed_transactions", mixed_batches.load());
    add("db_connections_abandoned", db_connections_abandoned.load());
    for (std::size_t i = 0; i < pruned_jobs.size(); ++i) {
        const auto state = static_cast<PrunedState>(i);
        add("pruned." + std::string(kPrunedStates(state)), pruned_jobs[state].load());
    }
    add("partitions_created", partitions_created.load());
    add("notifier.sent", results.sent.load());
    add("notifier.failed_rounds", results.failed_rounds.load());
    for (std::size_t i = 0; i < notifications.forged.size(); ++i) {
        const auto channel = static_cast<NotificationCounters::Channel>(i);
        add("forged." + std::string(NotificationCounters::kChannels(channel)),
            notifications.forged[channel].load());
    }
    add("revocations_verified", notifications.revocations_verified.load());
    add("auth.accepted", auth.accepted.load());
    add("auth.refused", auth.refused.load());
    add("auth.failed", auth.failed.load());
    add("auth.lookups", auth.lookups.load());
    add("auth.sessions_revoked", auth.sessions_revoked.load());
    for (std::size_t i = 0; i < rejections.size(); ++i) {
        add("rejected." + std::string(store::to_string(static_cast<store::Rejection>(i))),
            rejections[i].load());
    }
    for (std::size_t i = 0; i < errors.size(); ++i) {
        add("error." + std::string(proto::errors::kCounted[i]), errors[i].load());
    }
    return out.empty() ? "nothing happened" : out;
}

}  // namespace aclaim::coordinator::metrics
