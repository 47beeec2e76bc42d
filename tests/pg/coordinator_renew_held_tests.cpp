// Protocol 1.3's RENEW that names every held job, at a real coordinator: granted when asked,
// one renewal statement for all its jobs, each job answered LEASE or REVOKED under its own
// request id, refused as a whole when its list is malformed or too long; and what it saves: the
// RENEW messages a worker library holding 16 jobs sends per heartbeat, with and without it.

#include <catch2/catch.hpp>
#include <cstdio>
#include <map>
#include <set>

#include "tests/pg/coordinator_client.hpp"
#include "tests/support/rows.hpp"
#include "worker/client.hpp"

using namespace aclaim;
using namespace aclaim::testing;

using namespace std::chrono_literals;

namespace {

constexpr base::Instant kT0 = base::instant_from_micros(1'700'000'000'000'000);

/// `n` answers, whatever their order, by request id; fails on a second answer to one id.
std::map<std::uint64_t, proto::Message> answers(RawWorker& w, std::size_t n) {
    std::map<std::uint64_t, proto::Message> out;
    for (auto& m : w.others) out.emplace(proto::request_id(m), std::move(m));
    w.others.clear();
    while (out.size() < n) {
        auto m = w.receive(10s);
        REQUIRE(m.has_value());
        const auto req = proto::request_id(*m);
        REQUIRE(out.count(req) == 0);
        out.emplace(req, std::move(*m));
    }
    return out;
}

std::uint64_t renew_statements(const coordinator::Coordinator& c) {
    return c.metrics().statement_latency[coordinator::Metrics::Statement::Renew].snapshot().count;
}

}  // namespace

TEST_CASE_METHOD(
    ManualCoordinator,
    "a RENEW naming several jobs renews them in one statement, each answered on its own",
    "[coordinator][renew_held]") {
    store.enqueue(1, some_jobs(16), clock.now());
    const auto other_org = store.enqueue(2, some_jobs(1), clock.now());

    auto w = h.worker(GENERATE(proto::Encoding::Binary, proto::Encoding::Json));
    const auto welcome = w->hello("w1", 1, {std::string(proto::kFeatureRenewHeld)});
    REQUIRE(welcome.features == std::vector<std::string>{std::string(proto::kFeatureRenewHeld)});
    const auto held = w->expect<proto::Assigned>(w->claim(16)).jobs;
    REQUIRE(held.size() == 16);
    auto stranger = h.greeted("w2", 2);
    const auto theirs = stranger->claim_one();
    REQUIRE(theirs.job_id == other_org[0]);

    SECTION("all renewed, one stale generation revoked, another organization's job refused") {
        clock.advance(2s);
        const auto statements = renew_statements(*h.coordinator);
        const auto messages = h.coordinator->metrics().renew_messages.load();
        proto::Renew renew{w->next_req(), held[0].job_id, held[0].generation};
        std::map<std::uint64_t, store::JobId> job_of{{renew.req, held[0].job_id}};
        for (std::size_t i = 1; i < held.size(); ++i) {
            // Job 5 quoted at a generation it never had.
            const auto generation = held[i].generation + (i == 5 ? 7 : 0);
            renew.held.push_back({w->next_req(), held[i].job_id, generation});
            job_of[renew.held.back().req] = held[i].job_id;
        }
        renew.held.push_back({w->next_req(), theirs.job_id, theirs.generation});
        w->send(renew);

        const auto got = answers(*w, 17);
        std::size_t leases = 0;
        for (const auto& [req, m] : got) {
            CAPTURE(req);
            if (req == renew.held.back().req) {
                const auto& r = std::get<proto::Revoked>(m);
                CHECK(r.reason == "other_organization");
                CHECK(r.job_id == theirs.job_id);
                continue;
            }
            REQUIRE(job_of.count(req) == 1);
            if (job_of[req] == held[5].job_id) {
                const auto& r = std::get<proto::Revoked>(m);
                CHECK(r.reason == "stale_generation");
                CHECK(r.generation == held[5].generation + 7);
                continue;
            }
            const auto& lease = std::get<proto::LeaseMsg>(m);
            CHECK(lease.job_id == job_of[req]);
            CHECK(lease.lease_expires_at_us ==
                  base::to_micros(clock.now()) + std::int64_t{10000} * 1000);
            ++leases;
        }
        CHECK(leases == 15);
        // One statement renewed them all; the coordinator received one RENEW.
        CHECK(renew_statements(*h.coordinator) == statements + 1);
        CHECK(h.coordinator->metrics().renew_messages.load() == messages + 1);
        // The stranger's lease is untouched, and job 5 is still held: REVOKED changed nothing.
        auto conn = h.db.connect();
        CHECK(job_state(*conn, theirs.job_id) == "assigned");
        CHECK(job_state(*conn, held[5].job_id) == "assigned");
    }

    SECTION("an oversized or malformed list is one ERROR and disturbs nothing") {
        proto::Renew big{w->next_req(), held[0].job_id, held[0].generation};
        for (std::size_t i = 0; i < proto::kMaxHeldRenewals; ++i)
            big.held.push_back(
                {w->next_req(), held[1 + i % 15].job_id, held[1 + i % 15].generation});
        w->send(big);
        const auto e = std::get<proto::Error>(answers(*w, 1).at(big.req));
        CHECK(e.code == "invalid");
        CHECK(e.text.find("'held'") != std::string::npos);

        const auto bad_req = w->next_req();
        w->send_frames({std::string(proto::kTagJson), "RENEW",
                        R"({"req": )" + std::to_string(bad_req) + R"(,"job_id": )" +
                            std::to_string(held[0].job_id) + R"(,"generation": )" +
                            std::to_string(held[0].generation) + R"(,"held": [{"req": 1}]})"});
        const auto u = std::get<proto::Error>(answers(*w, 1).at(bad_req));
        CHECK(u.code == "undecodable");
        CHECK(u.text.find("held[0]") != std::string::npos);
        // Nothing else was answered (no job of either list), and the session renews as before.
        CHECK_FALSE(w->receive(200ms).has_value());
        const auto lease = w->expect<proto::LeaseMsg>(
            w->request(proto::Renew{0, held[0].job_id, held[0].generation}));
        CHECK(lease.job_id == held[0].job_id);
    }
}

TEST_CASE("a RENEW naming several jobs takes one of the session's places; refusals answer each",
          "[coordinator][renew_held]") {
    base::ManualClock clock(kT0);
    CoordinatorHarness h(
        clock, [](coordinator::CoordinatorOptions& o) { o.router.max_inflight_per_session = 2; });
    store::AssignmentStore store(h.db.dsn());
    store.enqueue(1, some_jobs(8), clock.now());
    auto w = h.worker();
    w->hello("w1", 1, {std::string(proto::kFeatureRenewHeld)});
    const auto held = w->expect<proto::Assigned>(w->claim(8)).jobs;
    REQUIRE(held.size() == 8);
    // Eight jobs, a limit of two outstanding requests: one RENEW is one of them.
    proto::Renew renew{w->next_req(), held[0].job_id, held[0].generation};
    for (std::size_t i = 1; i < held.size(); ++i)
        renew.held.push_back({w->next_req(), held[i].job_id, held[i].generation});
    w->send(renew);
    for (const auto& [req, m] : answers(*w, 8)) CHECK(std::holds_alternative<proto::LeaseMsg>(m));

    // Without a session every job named is answered no_session.
    auto stranger = h.worker();
    proto::Renew early{1, held[0].job_id, held[0].generation, {{2, held[1].job_id, 1}}};
    stranger->send(early);
    const auto refused = answers(*stranger, 2);
    CHECK(std::get<proto::Error>(refused.at(1)).code == "no_session");
    CHECK(std::get<proto::Error>(refused.at(2)).code == "no_session");
}

TEST_CASE(
    "held-job heartbeats: RENEW messages per held job per interval, with and without "
    "renew_held",
    "[coordinator][renew_held][measure]") {
    // A real clock: the worker library renews on its own schedule. Lease 1.2 s, heartbeat 400 ms.
    base::SystemClock clock;
    CoordinatorHarness h(clock,
                         [](coordinator::CoordinatorOptions& o) { o.router.lease_ms = 1200; });
    store::AssignmentStore store(h.db.dsn());
    store.enqueue(1, some_jobs(32), clock.now());
    zmq::context_t ctx;
    constexpr int kHeld = 16;
    const auto measure = [&](bool renew_held) {
        worker::ClientOptions o;
        o.endpoints = {h.coordinator->endpoint()};
        o.worker_id = renew_held ? "measure-held" : "measure-each";
        o.org_id = 1;
        o.renew_held = renew_held;
        worker::Client c(ctx, o);
        c.start();
        int assigned = 0;
        bool asked = false;
        const auto until = [&](const std::function<bool()>& done, std::chrono::milliseconds limit) {
            const auto deadline = std::chrono::steady_clock::now() + limit;
            while (!done() && std::chrono::steady_clock::now() < deadline) {
                for (const auto& e : c.poll(20ms)) {
                    if (std::holds_alternative<worker::JobAssigned>(e)) ++assigned;
                }
                if (c.ready() && !asked) {
                    c.claim(kHeld, 0);
                    asked = true;
                }
            }
        };
        until([&] { return assigned == kHeld; }, 10s);
        REQUIRE(assigned == kHeld);
        REQUIRE(c.granted(proto::kFeatureRenewHeld) == renew_held);
        // Two intervals for the held jobs to fall into one heartbeat, then ten measured.
        until([] { return false; }, 800ms);
        const auto& m = h.coordinator->metrics();
        const auto messages = m.renew_messages.load();
        const auto jobs = m.renew_jobs.load();
        const auto started = std::chrono::steady_clock::now();
        until([] { return false; }, 4000ms);
        const double intervals =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count() / 0.4;
        const auto sent = m.renew_messages.load() - messages;
        const auto named = m.renew_jobs.load() - jobs;
        CHECK(c.held().size() == static_cast<std::size_t>(kHeld));
        for (const auto& j : c.held().all()) c.release(j);
        until([&] { return c.pending() == 0; }, 5s);
        c.close();
        const double per_job = static_cast<double>(sent) / (kHeld * intervals);
        std::printf(
            "renew_held=%s: %d held jobs, %.1f heartbeat intervals: %llu RENEW messages naming "
            "%llu jobs; %.4f messages per held job per interval\n",
            renew_held ? "on " : "off", kHeld, intervals, static_cast<unsigned long long>(sent),
            static_cast<unsigned long long>(named), per_job);
        return per_job;
    };
    const double before = measure(false);
    const double after = measure(true);
    CHECK(before >= 0.9);
    CHECK(after <= 1.0 / 16 + 0.01);
}
