#pragma once

// What the integration tests share: producer logins created for one test, a LISTEN with a
// bounded wait, and jobs driven to a terminal state through the store.

#include <chrono>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "common/store/assignment_store.hpp"
#include "tests/support/store_fixture.hpp"
#include "tests/support/test_database.hpp"

namespace aclaim::testing {

/// A login role bound to one organization for the life of the object, named after the test's
/// database so that concurrent suites on one server never share one.
class ProducerLogin {
  public:
    ProducerLogin(const TestDatabase& db, const std::string& suffix, store::OrgId org)
        : db_(db), login_(db.name() + "_" + suffix) {
        auto admin = db_.connect();
        pqxx::work txn(*admin);
        txn.exec("DROP ROLE IF EXISTS " + txn.quote_name(login_));
        txn.exec("CREATE ROLE " + txn.quote_name(login_) + " LOGIN");
        txn.exec_params("SELECT aclaim_producer_bind($1::name, $2::bigint, 'test', 0)", login_,
                        org);
        txn.commit();
    }
    ~ProducerLogin() {
        try {
            auto admin = db_.connect();
            pqxx::nontransaction txn(*admin);
            txn.exec_params(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1",
                login_);
            txn.exec("DROP ROLE IF EXISTS " + txn.quote_name(login_));
        } catch (const std::exception&) {
            // A role left behind is dropped by the next test of the same name.
        }
    }
    ProducerLogin(const ProducerLogin&) = delete;
    ProducerLogin& operator=(const ProducerLogin&) = delete;

    const std::string& login() const { return login_; }
    std::string dsn() const { return with_user(db_.dsn(), login_); }

  private:
    const TestDatabase& db_;
    std::string login_;
};

/// The payloads of the notifications on one channel, collected on a connection of their own.
class Notifications final : public pqxx::notification_receiver {
  public:
    Notifications(pqxx::connection& conn, const std::string& channel)
        : pqxx::notification_receiver(conn, channel) {}

    void operator()(const std::string& payload, int /*backend_pid*/) override {
        received_.push_back(payload);
    }

    /// What arrives within `wait` (returning as soon as something has).
    std::vector<std::string> wait_for(std::chrono::milliseconds wait) {
        const auto us = std::chrono::duration_cast<std::chrono::microseconds>(wait).count();
        conn().await_notification(static_cast<long>(us / 1'000'000),
                                  static_cast<long>(us % 1'000'000));
        return std::exchange(received_, {});
    }

  private:
    std::vector<std::string> received_;
};

/// Enqueues `count` jobs of the organization and claims them for `worker`.
inline std::vector<store::Lease> claimed_jobs(store::AssignmentStore& store, store::OrgId org,
                                              int count, const std::string& worker = "w") {
    std::vector<store::NewJob> jobs(static_cast<std::size_t>(count));
    for (int i = 0; i < count; ++i)
        jobs[static_cast<std::size_t>(i)].payload = "p" + std::to_string(i);
    store.enqueue(org, jobs, kT0);
    return store.claim(org, {worker, count, {}}, std::chrono::seconds(60), kT0).leases;
}

inline store::TransitionRequest completion(const store::Lease& l, const std::string& ref,
                                           const std::string& worker = "w") {
    store::TransitionRequest r{l.org_id, l.job_id, l.generation, worker};
    r.result_ref = ref;
    return r;
}

}  // namespace aclaim::testing
