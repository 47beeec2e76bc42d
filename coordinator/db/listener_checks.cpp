#include "coordinator/db/listener_checks.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <pqxx/pqxx>
#include <unordered_set>

#include "common/base/queue_name.hpp"
#include "common/store/pg_array.hpp"
#include "common/store/store_sql.hpp"

namespace aclaim::coordinator {

namespace {

/// A positive decimal id, or nothing.
std::optional<std::int64_t> parse_id(std::string_view text) {
    std::int64_t id = 0;
    const char* last = text.data() + text.size();
    const auto [end, ec] = std::from_chars(text.data(), last, id);
    if (text.empty() || ec != std::errc() || end != last || id <= 0) return std::nullopt;
    return id;
}

/// The reasons an aclaim_revoke payload may give: those a row can bear out.
constexpr std::string_view kCancelled = "cancelled";

}  // namespace

std::optional<OrgWoken> parse_wake(std::string_view payload) {
    const auto colon = payload.find(':');
    const auto org = parse_id(payload.substr(0, colon));
    if (!org) return std::nullopt;
    if (colon == std::string_view::npos) return OrgWoken{*org, ""};
    const std::string_view queue = payload.substr(colon + 1);
    if (!base::valid_queue_name(queue)) return std::nullopt;
    return OrgWoken{*org, std::string(queue)};
}

bool valid_schedule_payload(std::string_view payload) {
    std::int64_t us = 0;
    const char* last = payload.data() + payload.size();
    const auto [end, ec] = std::from_chars(payload.data(), last, us);
    return !payload.empty() && ec == std::errc() && end == last;
}

std::optional<RevokeClaim> parse_revoke(std::string_view payload) {
    std::array<std::string_view, 4> fields;
    for (auto& f : fields) {
        const auto colon = payload.find(':');
        if (colon == std::string_view::npos) return std::nullopt;
        f = payload.substr(0, colon);
        payload.remove_prefix(colon + 1);
    }
    const auto org = parse_id(fields[0]);
    const auto job = parse_id(fields[1]);
    const auto generation = parse_id(fields[2]);
    if (!org || !job || !generation || fields[3] != kCancelled || payload.empty()) {
        return std::nullopt;
    }
    return RevokeClaim{*org, *job, *generation, std::string(payload)};
}

std::string Forgeries::printable(std::string_view payload) {
    std::string out;
    const bool clipped = payload.size() > kShownBytes;
    for (const char c : payload.substr(0, kShownBytes)) {
        const auto byte = static_cast<unsigned char>(c);
        if (byte < 0x20 || byte >= 0x7f || c == '\\') {
            constexpr std::string_view kHex = "0123456789abcdef";
            out += "\\x";
            out += kHex[byte >> 4];
            out += kHex[byte & 0xf];
        } else {
            out += c;
        }
    }
    if (clipped) out += "...";
    return out;
}

void Forgeries::drop(NotificationCounters::Channel channel, std::string_view payload,
                     std::string_view why) {
    const auto n = counters_.forged[channel].fetch_add(1, std::memory_order_relaxed) + 1;
    if (!std::has_single_bit(n)) return;
    spdlog::warn(
        "dropped a notification on {} ({}; {} dropped on this channel so far): '{}' ({} bytes); "
        "any database login can NOTIFY, so nothing a channel says is acted on unchecked",
        NotificationCounters::kChannels(channel), why, n, printable(payload), payload.size());
}

void RevokeChecks::add(RevokeClaim claim, std::string payload) {
    if (pending_.size() >= kMaxPending) {
        spdlog::warn(
            "listener: {} revoke notifications wait for the database; the oldest is dropped "
            "unchecked (its holder learns of the cancellation at its next renewal)",
            pending_.size());
        pending_.erase(pending_.begin());
    }
    pending_.push_back({std::move(claim), std::move(payload)});
}

void RevokeChecks::prepare(pqxx::connection& conn) {
    conn.prepare(store::sql::kCancelledHolders.name, store::sql::kCancelledHolders.text);
}

void RevokeChecks::check(pqxx::connection& conn, const Connections& connections,
                         StatementWatchdog::Watch& watch, Poster& poster) {
    while (!pending_.empty()) {
        const std::size_t n = std::min(pending_.size(), kBatch);
        std::vector<std::int64_t> orgs, jobs, generations;
        std::vector<std::string> workers;
        orgs.reserve(n);
        jobs.reserve(n);
        generations.reserve(n);
        workers.reserve(n);
        for (std::size_t i = 0; i < n; ++i) {
            const RevokeClaim& c = pending_[i].claim;
            orgs.push_back(c.org);
            jobs.push_back(c.job);
            generations.push_back(c.generation);
            workers.push_back(c.worker);
        }
        std::unordered_set<std::int64_t> borne_out;
        {
            const auto started = LatencyClock::now();
            ArmedWatch armed(watch, conn.sock(), connections.deadline_from_now());
            pqxx::read_transaction txn(conn);
            const pqxx::result rows = txn.exec_prepared(
                store::sql::kCancelledHolders.name, store::pg_array(orgs), store::pg_array(jobs),
                store::pg_array(generations), store::pg_array(workers));
            txn.commit();
            if (armed.release()) {
                throw pqxx::broken_connection("the revoke check passed its deadline");
            }
            counters_.check_latency.observe(LatencyClock::now() - started);
            for (const auto& row : rows) borne_out.insert(row[0].as<std::int64_t>());
        }
        std::vector<Event> verified;
        for (std::size_t i = 0; i < n; ++i) {
            Pending& p = pending_[i];
            if (borne_out.count(static_cast<std::int64_t>(i) + 1) == 0) {
                forgeries_.drop(NotificationCounters::Channel::Revoke, p.payload,
                                "its job's row does not show that generation cancelled while "
                                "that worker held it");
                continue;
            }
            counters_.revocations_verified.fetch_add(1, std::memory_order_relaxed);
            store::Reclaimed r;
            r.org_id = p.claim.org;
            r.job_id = p.claim.job;
            r.generation = p.claim.generation;
            r.assignee = std::move(p.claim.worker);
            r.state = store::JobState::Cancelled;
            r.reason = std::string(kCancelled);
            verified.emplace_back(std::move(r));
        }
        pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(n));
        if (!verified.empty()) poster.post(std::move(verified));
    }
}

}  // namespace aclaim::coordinator
