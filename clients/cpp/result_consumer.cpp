#include "clients/cpp/result_consumer.hpp"

#include <algorithm>
#include <stdexcept>

#include "clients/cpp/client_sql.hpp"
#include "common/base/enum_names.hpp"
#include "common/store/conninfo.hpp"
#include "common/store/pg_field.hpp"
#include "common/store/session_sql.hpp"

namespace aclaim::clients {

constexpr base::EnumNames<Outcome, 4> kOutcomeNames{
    {"completed", "failed", "discarded", "cancelled"}};
static_assert(kOutcomeNames.covers(Outcome::Cancelled));

std::string_view to_string(Outcome o) {
    return kOutcomeNames(o);
}

std::optional<Outcome> parse_outcome(std::string_view s) {
    return kOutcomeNames.parse(s);
}

namespace {

/// The channel every terminal outcome notifies, with its organization as the payload.
constexpr const char* kChannel = "aclaim_outcomes";

Verdict verdict_of(const pqxx::row& r) {
    Verdict v;
    v.seq = r["seq"].as<std::int64_t>();
    v.job_id = r["job_id"].as<store::JobId>();
    const auto outcome = parse_outcome(r["outcome"].c_str());
    if (!outcome)
        throw std::runtime_error(std::string("unknown outcome '") + r["outcome"].c_str() + "'");
    v.outcome = *outcome;
    v.queue = r["queue"].as<std::string>();
    v.generation = r["generation"].as<store::Generation>();
    v.attempts = r["attempts"].as<int>();
    v.result_ref = store::optional_of<std::string>(r["result_ref"]);
    v.error = store::optional_of<std::string>(r["error"]);
    v.dedupe_key = store::optional_of<std::string>(r["dedupe_key"]);
    v.at = r["at_us"].as<base::Instant>();
    return v;
}

}  // namespace

/// Remembers that the organization had an outcome committed since the last look. A notification
/// is a hint to fetch, never the outcome itself: merged or lost ones cost latency, not outcomes.
class ResultConsumer::Receiver final : public pqxx::notification_receiver {
  public:
    Receiver(pqxx::connection_base& conn, store::OrgId org)
        : pqxx::notification_receiver(conn, kChannel), org_(std::to_string(org)) {}

    void operator()(const std::string& payload, int /*backend_pid*/) override {
        if (payload == org_) woken_ = true;
    }

    bool take() { return std::exchange(woken_, false); }

  private:
    std::string org_;
    bool woken_ = false;
};

ResultConsumer::ResultConsumer(const std::string& dsn, const base::Clock& clock, std::string group,
                               ConsumerOptions options)
    : group_(std::move(group)), clock_(clock), options_(std::move(options)) {
    if (options_.batch < 1 || options_.batch > 10000)
        throw std::invalid_argument("ResultConsumer: batch is 1 to 10000");
    conn_ = std::make_unique<pqxx::connection>(store::guarded_dsn(dsn, options_.statement_timeout));
    {
        pqxx::nontransaction session(*conn_);
        session.exec_params(store::sql::kSetApplicationName.text, options_.application_name);
        session.exec_params(store::sql::kSetStatementTimeout.text,
                            std::to_string(options_.statement_timeout.count()));
    }
    pqxx::work txn(*conn_, "consumer_group");
    if (options_.create_group) {
        const auto r =
            txn.exec_params1(sql::kGroupCreate.text, group_,
                             options_.start == GroupStart::Latest ? "latest" : "earliest",
                             options_.org, clock_.now());
        org_ = r["org_id"].as<store::OrgId>();
    } else {
        int found = 0;
        for (const auto& r : txn.exec_params(sql::kGroups.text, options_.org)) {
            if (r["name"].as<std::string>() == group_) {
                org_ = r["org_id"].as<store::OrgId>();
                ++found;
            }
        }
        if (found == 0) throw std::runtime_error("no consumer group '" + group_ + "'");
        // A trusted login without an organization sees every organization's groups, and a name
        // may stand in several: binding to one of them would follow someone else's verdicts.
        if (found > 1) {
            throw std::runtime_error("consumer group '" + group_ +
                                     "' exists in several organizations: name the organization");
        }
    }
    txn.commit();
    // Listening before the first fetch: every outcome committed after that fetch's snapshot
    // notifies this connection.
    receiver_ = std::make_unique<Receiver>(*conn_, org_);
}

ResultConsumer::~ResultConsumer() = default;

std::vector<Verdict> ResultConsumer::fetch() {
    // A transaction of its own, committed at once: the positions the fetch gave to newly
    // committed outcomes become visible to every consumer, and the sequencer's lock is let go.
    ++fetches_;
    pqxx::work txn(*conn_, "consumer_fetch");
    std::vector<Verdict> out;
    for (const auto& r : txn.exec_params(sql::kFetch.text, group_, options_.batch, org_)) {
        out.push_back(verdict_of(r));
    }
    txn.commit();
    return out;
}

std::vector<Verdict> ResultConsumer::next(base::Duration wait) {
    // The wait is counted from the call, not from after the first fetch: a deadline read after
    // the fetch would move with any time that passed during it (and on a clock that moved then,
    // never come).
    const auto deadline = clock_.monotonic_now() + wait;
    // A notification taken from here on may be of an outcome the fetch below does not see yet.
    receiver_->take();
    auto found = fetch();
    while (found.empty()) {
        const auto left = std::chrono::duration_cast<std::chrono::microseconds>(
            deadline - clock_.monotonic_now());
        if (left.count() <= 0) break;
        // Notifications that arrived since the last fetch are already queued on the connection,
        // so the wait returns at once for an outcome committed between that fetch and now.
        const auto step = std::min<std::int64_t>(left.count(), 1'000'000);
        conn_->await_notification(static_cast<long>(step / 1'000'000),
                                  static_cast<long>(step % 1'000'000));
        if (receiver_->take()) found = fetch();
    }
    // One look at the deadline, in case the connection dropped a notification: at most one query
    // per wait while nothing happens.
    if (found.empty()) found = fetch();
    return found;
}

std::int64_t ResultConsumer::ack(std::int64_t seq) {
    pqxx::work txn(*conn_, "consumer_ack");
    const auto cursor =
        txn.exec_params1(sql::kAck.text, group_, seq, org_, clock_.now())[0].as<std::int64_t>();
    txn.commit();
    return cursor;
}

GroupStatus ResultConsumer::status() {
    pqxx::read_transaction txn(*conn_, "consumer_status");
    for (const auto& r : txn.exec_params(sql::kGroups.text, org_)) {
        if (r["name"].as<std::string>() != group_) continue;
        return {r["org_id"].as<store::OrgId>(), group_, r["acked"].as<std::int64_t>(),
                r["head"].as<std::int64_t>(), r["lag"].as<std::int64_t>()};
    }
    throw std::runtime_error("consumer group '" + group_ + "' no longer exists");
}

bool ResultConsumer::drop_group(pqxx::transaction_base& txn, const std::string& group,
                                std::optional<store::OrgId> org) {
    return txn.exec_params1(sql::kGroupDrop.text, group, org)[0].as<bool>();
}

}  // namespace aclaim::clients
