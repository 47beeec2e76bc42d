// End to end with a PostgreSQL that hangs rather than fails: every server process frozen with
// SIGSTOP, or a route that stops forwarding without resetting anything. TCP stays up in both, so
// only the coordinator's own deadline can answer: a CLAIM and a COMPLETE must each be answered
// within --db-deadline-ms, and once the database is back everything drains and the checker holds.

#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <pqxx/pqxx>
#include <sstream>
#include <zmq.hpp>

#include "common/ops/checker.hpp"
#include "common/proto/wire_errors.hpp"
#include "common/store/assignment_store.hpp"
#include "common/store/migrations.hpp"
#include "tests/e2e/stall_relay.hpp"
#include "tests/support/checker_support.hpp"
#include "tests/support/pg_server.hpp"
#include "tests/support/process.hpp"
#include "tests/support/raw_worker.hpp"

using namespace aclaim;
using namespace aclaim::testing;
using namespace std::chrono_literals;

namespace {

/// The documented bound (--db-deadline-ms, its default) and the slack allowed on top of it for a
/// loaded machine: the router answers at its next poll after the deadline.
constexpr auto kDeadline = 2000ms;
constexpr auto kSlack = 1500ms;
constexpr int kJobs = 150;

pid_t parent_of(pid_t pid, char* state) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(in, line);
    const auto close = line.rfind(')');
    if (close == std::string::npos) return -1;
    std::istringstream rest(line.substr(close + 2));
    char s = '?';
    pid_t ppid = -1;
    rest >> s >> ppid;
    if (state) *state = s;
    return ppid;
}

/// Every process of one server stopped with SIGSTOP for as long as this lives: the postmaster
/// first, so that it forks nothing new, then each of its children. SIGCONT on destruction, so
/// that a failed assertion never leaves a frozen server behind.
class Frozen {
  public:
    explicit Frozen(const std::string& data_dir) {
        // A destructor does not run for a constructor that throws: thaw here on a failure.
        try {
            freeze(data_dir);
        } catch (...) {
            thaw();
            throw;
        }
    }
    ~Frozen() { thaw(); }
    Frozen(const Frozen&) = delete;
    Frozen& operator=(const Frozen&) = delete;

    void thaw() {
        for (auto it = pids_.rbegin(); it != pids_.rend(); ++it) ::kill(*it, SIGCONT);
        pids_.clear();
    }

  private:
    void freeze(const std::string& data_dir) {
        std::ifstream in(data_dir + "/postmaster.pid");
        pid_t postmaster = -1;
        in >> postmaster;
        REQUIRE(postmaster > 0);
        stop(postmaster);
        for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
            const std::string name = entry.path().filename().string();
            if (name.find_first_not_of("0123456789") != std::string::npos) continue;
            const pid_t pid = std::stoi(name);
            if (parent_of(pid, nullptr) == postmaster) stop(pid);
        }
        REQUIRE(pids_.size() >= 3);
        // A definite condition rather than a pause: every process reports itself stopped, or has
        // exited (a zombie, as its stopped parent cannot reap it).
        REQUIRE(eventually(
            [&] {
                for (const pid_t pid : pids_) {
                    char state = '?';
                    if (parent_of(pid, &state) >= 0 && state != 'T' && state != 'Z') return false;
                }
                return true;
            },
            5s));
    }
    void stop(pid_t pid) {
        if (::kill(pid, SIGSTOP) == 0) pids_.push_back(pid);
    }
    std::vector<pid_t> pids_;
};

std::string with_port(const std::string& uri, int port) {
    const auto at = uri.find("@127.0.0.1:");
    REQUIRE(at != std::string::npos);
    const auto start = at + std::string("@127.0.0.1:").size();
    return uri.substr(0, start) + std::to_string(port) + uri.substr(uri.find('/', start));
}

/// A coordinator process, workers under load, and a fresh client; the database path may be
/// frozen or stalled between them.
struct Rig {
    explicit Rig(const ThrowawayServer& server, const std::string& coordinator_dsn) : db(server) {
        char tmpl[] = "/tmp/aclaim-hang-e2e.XXXXXX";
        log_dir = ::mkdtemp(tmpl);
        endpoint = "tcp://127.0.0.1:" + std::to_string(free_port());
        store::AssignmentStore store(server.dsn());
        std::vector<store::NewJob> jobs;
        for (int i = 0; i < kJobs; ++i) jobs.push_back({0, "hang-" + std::to_string(i), 5});
        store.enqueue(1, jobs, base::SystemClock().now());
        // The lease outlasts the hang, so that the holders keep their jobs through it.
        processes.push_back(std::make_unique<Process>(
            std::vector<std::string>{bin("aclaim-coordinator"), "--dsn", coordinator_dsn, "--bind",
                                     endpoint, "--plaintext", "--http-bind", "127.0.0.1:0",
                                     "--lease-ms", "20000", "--db-deadline-ms",
                                     std::to_string(kDeadline.count()), "--log-level", "info"},
            std::map<std::string, std::string>{}, log_dir + "/coordinator.log"));
        for (const char* id : {"load-a", "load-b"}) {
            processes.push_back(std::make_unique<Process>(
                std::vector<std::string>{bin("aclaim-worker"), "--connect", endpoint, "--org", "1",
                                         "--id", id, "--review-ms", "30", "--concurrency", "4",
                                         "--claim-wait-ms", "500", "--log-level", "info"},
                std::map<std::string, std::string>{}, log_dir + "/" + id + ".log"));
        }
    }
    ~Rig() {
        processes.clear();
        const char* keep = std::getenv("ACLAIM_KEEP_LOGS");
        if (!keep || std::string(keep) != "1") std::filesystem::remove_all(log_dir);
    }

    long scalar(const std::string& sql) {
        pqxx::connection conn(db.dsn());
        pqxx::read_transaction t(conn);
        return t.exec1(sql)[0].as<long>();
    }
    long completed() { return scalar("SELECT count(*) FROM jobs WHERE state = 'completed'"); }

    const ThrowawayServer& db;
    std::string log_dir;
    std::string endpoint;
    std::vector<std::unique_ptr<Process>> processes;
};

/// How long the answer to `req` took, failing the test when none came within `limit`.
template <class T>
std::pair<T, std::chrono::milliseconds> timed(RawWorker& w, std::uint64_t req,
                                              base::MonotonicTime sent,
                                              std::chrono::milliseconds limit = 10s) {
    T answer = w.expect<T>(req, limit);
    return {answer, std::chrono::duration_cast<std::chrono::milliseconds>(
                        base::SystemClock().monotonic_now() - sent)};
}

/// Re-sends a COMPLETE until it is accepted, as a worker does after a retryable ERROR.
proto::Accepted complete_until_accepted(RawWorker& w, const proto::AssignedJob& job) {
    const auto deadline = base::SystemClock().monotonic_now() + 20s;
    while (true) {
        const auto req = w.next_req();
        w.send(proto::Complete{req, job.job_id, job.generation, "review:fresh"});
        auto m = w.answer(req, 10s);
        REQUIRE(m);
        if (auto* a = std::get_if<proto::Accepted>(&*m)) return *a;
        INFO("COMPLETE answered " << proto::type_name(*m));
        REQUIRE(std::holds_alternative<proto::Error>(*m));
        REQUIRE(proto::errors::retryable(std::get<proto::Error>(*m).code));
        REQUIRE(base::SystemClock().monotonic_now() < deadline);
        std::this_thread::sleep_for(100ms);
    }
}

/// The shared body: with the database path hung by `hang` and released by `release`, a fresh
/// client's CLAIM and a COMPLETE are answered within the bound, and afterwards every job is
/// completed once.
template <class Hang, class Release>
void answers_within_the_bound(Rig& rig, Hang hang, Release release) {
    INFO("logs in " << rig.log_dir << " (ACLAIM_KEEP_LOGS=1 keeps them)");
    zmq::context_t context;
    RawWorker holder(context, rig.endpoint);
    holder.hello("holder", 1);
    const auto job = holder.claim_one();
    // Under load before the hang: the workers are completing jobs.
    REQUIRE(eventually([&] { return rig.completed() >= 10; }, 20s));

    auto frozen = hang();
    RawWorker fresh(context, rig.endpoint);
    fresh.hello("fresh", 1);
    auto sent = base::SystemClock().monotonic_now();
    const auto [no_work, claim_ms] = timed<proto::NoWork>(fresh, fresh.claim(1, 0), sent);
    // Jobs are pending, so NO_WORK can only be the deadline's answer.
    CHECK(no_work.reason == "database unavailable");
    CHECK(claim_ms < kDeadline + kSlack);

    const auto req = holder.next_req();
    sent = base::SystemClock().monotonic_now();
    holder.send(proto::Complete{req, job.job_id, job.generation, "review:fresh"});
    const auto [error, complete_ms] = timed<proto::Error>(holder, req, sent);
    CHECK((error.code == "database_unavailable" || error.code == "outcome_unknown"));
    CHECK(complete_ms < kDeadline + kSlack);

    release(frozen);
    const auto accepted = complete_until_accepted(holder, job);
    CHECK(accepted.state == "completed");
    REQUIRE(eventually([&] { return rig.completed() == kJobs; }, 25s));
    CHECK(rig.scalar("SELECT count(*) FROM job_events WHERE kind = 'completed'") == kJobs);
    check_clean(check_database(rig.db.dsn()));
}

}  // namespace

TEST_CASE("with every PostgreSQL process frozen, a claim and a completion are answered in time",
          "[e2e][hang]") {
    ThrowawayServer server;
    Rig rig(server, server.dsn());
    answers_within_the_bound(
        rig, [&] { return std::make_unique<Frozen>(server.data_dir()); },
        [](std::unique_ptr<Frozen>& f) { f->thaw(); });
}

TEST_CASE("with a route that stops forwarding, a claim and a completion are answered in time",
          "[e2e][hang]") {
    ThrowawayServer server;
    StallRelay relay(server.port());
    Rig rig(server, with_port(server.dsn(), relay.port()));
    answers_within_the_bound(
        rig,
        [&] {
            relay.stall();
            return &relay;
        },
        [](StallRelay* r) { r->resume(); });
}
