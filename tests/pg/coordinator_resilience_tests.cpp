// The coordinator under hostile input, long polls and shutdown.

#include <catch2/catch.hpp>
#include <future>
#include <pqxx/pqxx>
#include <random>

#include "common/base/clock.hpp"
#include "coordinator/db/commit_resolution.hpp"
#include "tests/pg/coordinator_client.hpp"

using namespace aclaim;
using namespace aclaim::testing;

namespace {

proto::Error expect_error(RawWorker& w, const std::vector<std::string>& frames) {
    w.send_frames(frames);
    auto m = w.receive(5s);
    REQUIRE(m);
    REQUIRE(std::holds_alternative<proto::Error>(*m));
    return std::get<proto::Error>(*m);
}

std::string binary_body(const proto::Message& m) {
    return proto::encode(m, proto::Encoding::Binary).body;
}

}  // namespace

TEST_CASE_METHOD(SystemCoordinator,
                 "garbage is answered with ERROR and never stops others being served",
                 "[coordinator]") {
    store::AssignmentStore store(h.db.dsn());
    store.enqueue(1, some_jobs(1), clock.now());
    auto bad = h.worker();
    const std::string tag(proto::kTagBinary);

    CHECK(expect_error(*bad, {"x"}).code == "malformed");
    CHECK(expect_error(*bad, {tag, "CLAIM", "a", "b", "c"}).code == "malformed");
    CHECK(expect_error(*bad, {"NOPE/9", "CLAIM", binary_body(proto::Claim{1, 1, 0})}).code ==
          "wrong_version");
    CHECK(expect_error(*bad, {"ACLAIM/7", "CLAIM", binary_body(proto::Claim{1, 1, 0})}).code ==
          "wrong_version");
    CHECK(expect_error(*bad, {tag, "FROB", ""}).code == "unknown_type");
    CHECK(expect_error(*bad, {tag, "COMPLETE", std::string(proto::kMaxBodyBytes + 1, 'x')}).code ==
          "oversized");
    std::mt19937 rng(7);
    std::string noise(100, '\0');
    for (auto& c : noise) c = static_cast<char>(rng());
    CHECK(expect_error(*bad, {tag, "CLAIM", noise}).code == "undecodable");
    const auto json = expect_error(*bad, {std::string(proto::kTagJson), "CLAIM", R"({"req": 5})"});
    CHECK(json.code == "undecodable");
    CHECK(expect_error(*bad, {std::string(proto::kTagJson), "CLAIM", "{not json"}).code ==
          "undecodable");
    CHECK(expect_error(*bad, {tag, "WELCOME", binary_body(proto::Welcome{3, 1, 1, 1, 1})}).code ==
          "invalid");
    CHECK(expect_error(*bad, {tag, "CLAIM", binary_body(proto::Claim{4, 1, 0})}).code ==
          "no_session");

    auto good = h.greeted("w1", 1);
    CHECK(good->claim_one().payload == "payload-0");
    // The broken connection is still a connection: it can start over properly.
    CHECK(bad->hello("w2", 1).org_id == 1);
    const auto& m = h.coordinator->metrics();
    CHECK(m.errors_of("malformed") == 2);
    CHECK(m.errors_of("wrong_version") == 2);
    CHECK(m.errors_of("undecodable") == 3);
    CHECK(m.errors_of("no_session") == 1);
}

TEST_CASE_METHOD(SystemCoordinator,
                 "a waiting claim is woken by an enqueue, and an empty wait ends with NO_WORK",
                 "[coordinator]") {
    auto w = h.greeted("w1", 1);

    const auto started = base::SystemClock().monotonic_now();
    const auto short_wait = w->claim(1, 200);
    CHECK(w->expect<proto::NoWork>(short_wait, 5s).reason == "wait ended");
    CHECK(base::SystemClock().monotonic_now() - started >= 200ms);

    const auto parked_before = h.coordinator->metrics().parked.load();
    const auto long_wait = w->claim(1, 5000);
    REQUIRE(eventually([&] { return h.coordinator->metrics().parked.load() > parked_before; }));
    store::AssignmentStore store(h.db.dsn());
    const auto enqueued = base::SystemClock().monotonic_now();
    const auto ids = store.enqueue(1, some_jobs(1), clock.now());
    const auto assigned = w->expect<proto::Assigned>(long_wait, 6s);
    REQUIRE(assigned.jobs.size() == 1);
    CHECK(assigned.jobs[0].job_id == ids[0]);
    CHECK(base::SystemClock().monotonic_now() - enqueued < 2500ms);
}

TEST_CASE_METHOD(SystemCoordinator,
                 "a claim waiting in one organization is not woken by another's jobs",
                 "[coordinator]") {
    store::AssignmentStore store(h.db.dsn());
    const auto& parked = h.coordinator->metrics().parked;
    auto near = h.greeted("near", 1);
    // First an org-1 claim woken by an org-1 enqueue: the listener is up, so no "listener
    // ready" wake of every parked claim can come later and blur the count below.
    const auto warm = near->claim(1, 5000);
    REQUIRE(eventually([&] { return parked.load() >= 1; }));
    store.enqueue(1, some_jobs(1), clock.now());
    REQUIRE(near->expect<proto::Assigned>(warm, 6s).jobs.size() == 1);

    auto far = h.greeted("far", 2);
    const auto base = parked.load();
    const auto req = far->claim(1, 1500);
    REQUIRE(eventually([&] { return parked.load() == base + 1; }));
    const auto same_org = near->claim(1, 5000);
    REQUIRE(eventually([&] { return parked.load() == base + 2; }));
    store.enqueue(1, some_jobs(3), clock.now());
    // The org-1 claim is woken: the notification reached the router while the org-2 claim was
    // parked beside it.
    REQUIRE(near->expect<proto::Assigned>(same_org, 6s).jobs.size() == 1);
    CHECK(far->expect<proto::NoWork>(req, 5s).reason == "wait ended");
    // A claim woken by mistake finds nothing, parks again and still ends with "wait ended";
    // only the park count tells: one park each, none twice.
    CHECK(parked.load() == base + 2);
}

TEST_CASE_METHOD(SystemCoordinator, "stop answers a parked claim with draining and returns",
                 "[coordinator]") {
    auto w = h.greeted("w1", 1);
    const auto req = w->claim(1, 30000);
    REQUIRE(eventually([&] { return h.coordinator->metrics().parked.load() >= 1; }));
    auto stopped = std::async(std::launch::async, [&] { h.coordinator->stop(); });
    CHECK(w->expect<proto::NoWork>(req, 5s).reason == "draining");
    REQUIRE(stopped.wait_for(10s) == std::future_status::ready);
}

TEST_CASE_METHOD(SystemCoordinator,
                 "a COMPLETE sent during the drain is served and the job completed",
                 "[coordinator]") {
    store::AssignmentStore store(h.db.dsn());
    store.enqueue(1, some_jobs(1), clock.now());
    auto w = h.greeted("w1", 1);
    const auto job = w->claim_one();
    const auto parked = w->claim(1, 30000);
    REQUIRE(eventually([&] { return h.coordinator->metrics().parked.load() >= 1; }));
    auto stopped = std::async(std::launch::async, [&] { h.coordinator->stop(); });
    // The drain has begun once the parked claim is answered; nothing is at the database now.
    CHECK(w->expect<proto::NoWork>(parked, 5s).reason == "draining");
    const auto req = w->next_req();
    w->send(proto::Complete{req, job.job_id, job.generation, "r:drain"});
    const auto accepted = w->expect<proto::Accepted>(req, 5s);
    CHECK(accepted.state == "completed");
    // A draining coordinator opens no new session.
    auto late = h.worker();
    const auto hello = late->next_req();
    late->send(proto::Hello{hello, "w2", 1});
    CHECK(late->expect<proto::Error>(hello, 5s).code == "draining");
    REQUIRE(stopped.wait_for(10s) == std::future_status::ready);
    auto conn = h.db.connect();
    pqxx::read_transaction t(*conn);
    CHECK(t.exec1("SELECT state FROM jobs WHERE id = " + std::to_string(job.job_id))[0]
              .as<std::string>() == "completed");
}

TEST_CASE_METHOD(SystemCoordinator, "HELLOs refused during the drain do not hold it open",
                 "[coordinator]") {
    // A restarted coordinator's workers reconnect and say HELLO, each on its own backoff; as a
    // crowd they arrive more often than the drain's quiet window, and were it reset by each
    // refusal the drain would last its whole timeout (5 s here).
    auto w = h.greeted("w1", 1);
    const auto parked = w->claim(1, 30000);
    REQUIRE(eventually([&] { return h.coordinator->metrics().parked.load() >= 1; }));
    const auto began = std::chrono::steady_clock::now();
    auto stopped = std::async(std::launch::async, [&] { h.coordinator->stop(); });
    CHECK(w->expect<proto::NoWork>(parked, 5s).reason == "draining");
    auto late = h.worker();
    bool refused = false;
    while (stopped.wait_for(50ms) != std::future_status::ready &&
           std::chrono::steady_clock::now() - began < 6s) {
        const auto hello = late->next_req();
        late->send(proto::Hello{hello, "w2", 1});
        const auto answer = late->answer(hello, 40ms);
        const auto* error = answer ? std::get_if<proto::Error>(&*answer) : nullptr;
        if (error != nullptr && error->code == "draining") refused = true;
    }
    REQUIRE(stopped.wait_for(10s) == std::future_status::ready);
    CHECK(refused);
    CHECK(std::chrono::steady_clock::now() - began < 3s);
}

TEST_CASE_METHOD(SystemCoordinator, "every text the coordinator echoes is valid UTF-8",
                 "[coordinator]") {
    // RawWorker decodes every reply strictly: a JSON reply holding invalid UTF-8 fails the test.
    auto w = h.worker(proto::Encoding::Json);
    const auto type = expect_error(*w, {std::string(proto::kTagJson), "\xc3(", "{}"});
    CHECK(type.code == "unknown_type");
    CHECK(type.text.find(R"('\xc3(')") != std::string::npos);
    const auto tag = expect_error(*w, {"ACLAIM/\xff\xfe+json", "CLAIM", "{}"});
    CHECK(tag.code == "wrong_version");
    CHECK(tag.text.find(R"('ACLAIM/\xff\xfe+json')") != std::string::npos);
    // The frame count of a long message is the message's, not how many frames were kept.
    std::vector<std::string> hundred(100, "x");
    hundred[0] = std::string(proto::kTagJson);
    const auto many = expect_error(*w, hundred);
    CHECK(many.code == "malformed");
    CHECK(many.text.ends_with("this one has 100"));
}

TEST_CASE_METHOD(SystemCoordinator,
                 "a body of exactly 1 MiB is answered; one byte more drops the connection",
                 "[coordinator]") {
    auto w = h.greeted("w1", 1);
    check_transport_limit(*w, 5s);
}

TEST_CASE("an interrupted commit is resolved from the row, never guessed", "[coordinator]") {
    using coordinator::InterruptedTransition;
    using coordinator::resolve_interrupted;
    using Verdict = coordinator::CommitResolution::Verdict;
    using store::JobState;
    store::RowAuthority row;
    row.org_id = 1;
    row.generation = 4;
    row.assignee = "w1";
    InterruptedTransition complete{
        store::Operation::Complete,
        {.org = 1, .generation = 4, .worker = "w1", .result_ref = "ref"}};

    row.state = JobState::Completed;
    row.result_ref = "ref";
    const auto applied = resolve_interrupted(complete, row, base::Instant{});
    CHECK(applied.verdict == Verdict::Applied);
    CHECK(applied.state == JobState::Completed);
    row.result_ref = "other";
    CHECK(resolve_interrupted(complete, row, base::Instant{}).verdict == Verdict::NotApplied);
    row.state = JobState::Assigned;
    row.lease_expires_at = base::instant_from_micros(100);
    CHECK(resolve_interrupted(complete, row, base::Instant{}).verdict == Verdict::NotApplied);
    CHECK(resolve_interrupted(complete, std::nullopt, base::Instant{}).verdict ==
          Verdict::NotApplied);
    row.state = JobState::Quarantined;
    CHECK(resolve_interrupted(complete, row, base::Instant{}).verdict == Verdict::Unknown);

    InterruptedTransition release{store::Operation::Release,
                                  {.org = 1, .generation = 4, .worker = "w1"}};
    row.state = JobState::Assigned;
    CHECK(resolve_interrupted(release, row, base::Instant{}).verdict == Verdict::NotApplied);
    row.state = JobState::Pending;
    row.assignee.clear();
    CHECK(resolve_interrupted(release, row, base::Instant{}).verdict == Verdict::Unknown);
    // A committed release or retryable fail may have left the row scheduled (a backoff) or
    // discarded (the last attempt), and a cancel may have followed: not a proof either way.
    for (const auto state : {JobState::Scheduled, JobState::Discarded, JobState::Cancelled}) {
        row.state = state;
        CHECK(resolve_interrupted(release, row, base::Instant{}).verdict == Verdict::Unknown);
    }
    row.state = JobState::Completed;
    CHECK(resolve_interrupted(release, row, base::Instant{}).verdict == Verdict::NotApplied);
    row.generation = 5;
    row.state = JobState::Assigned;
    CHECK(resolve_interrupted(release, row, base::Instant{}).verdict == Verdict::Unknown);

    InterruptedTransition fail{store::Operation::Fail, {.org = 1, .generation = 4, .worker = "w1"}};
    row.generation = 4;
    row.state = JobState::Failed;
    row.assignee = "w1";
    CHECK(resolve_interrupted(fail, row, base::Instant{}).verdict == Verdict::Applied);
    row.org_id = 2;
    CHECK(resolve_interrupted(fail, row, base::Instant{}).verdict == Verdict::NotApplied);
}
