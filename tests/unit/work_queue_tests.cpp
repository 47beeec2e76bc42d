// The DB threads' queue: renewals go first, batches are of one kind (claims of one organization),
// and everything else keeps arrival order.

#include <atomic>
#include <catch2/catch.hpp>
#include <latch>
#include <thread>

#include "coordinator/db/work_queue.hpp"

using namespace aclaim;
using namespace aclaim::coordinator;
namespace {

/// Requests are told apart by their ticket.
DbRequest request(RequestKind kind, store::OrgId org, std::uint64_t ticket) {
    DbRequest r;
    r.ask.kind = kind;
    r.ask.org_id = org;
    if (kind != RequestKind::Claim) {
        r.ask.job_id = 10;
        r.ask.generation = 1;
    }
    r.ticket = ticket;
    return r;
}

DbRequest claim(store::OrgId org, std::uint64_t req) {
    return request(RequestKind::Claim, org, req);
}

DbRequest renew(std::uint64_t req) {
    return request(RequestKind::Renew, 1, req);
}

DbRequest complete(std::uint64_t req) {
    auto r = request(RequestKind::Complete, 1, req);
    r.ask.result_ref = "ref";
    return r;
}

std::uint64_t req_of(const DbRequest& r) {
    return r.ticket;
}

std::vector<std::uint64_t> reqs(const std::vector<DbRequest>& batch) {
    std::vector<std::uint64_t> out;
    for (const auto& r : batch) out.push_back(req_of(r));
    return out;
}

}  // namespace

TEST_CASE("work queue: renewals queued after other requests are taken first", "[work_queue]") {
    WorkQueue q;
    q.push(claim(1, 1));
    q.push(claim(1, 2));
    q.push(renew(3));
    q.push(complete(4));
    q.push(renew(5));
    q.push(claim(2, 6));
    REQUIRE(q.size() == 6);

    auto first = q.take(128);
    CHECK(reqs(first) == std::vector<std::uint64_t>{3, 5});
    CHECK(first.front().kind() == RequestKind::Renew);
    // Then the organizations in turn, each in arrival order: the claims of organization 1, the
    // other organization's claim, organization 1's completion.
    CHECK(reqs(q.take(128)) == std::vector<std::uint64_t>{1, 2});
    CHECK(reqs(q.take(128)) == std::vector<std::uint64_t>{6});
    auto fourth = q.take(128);
    CHECK(reqs(fourth) == std::vector<std::uint64_t>{4});
    CHECK(fourth.front().kind() == RequestKind::Complete);
    CHECK(q.size() == 0);
}

TEST_CASE("work queue: a batch never exceeds its size, and close drains what is left",
          "[work_queue]") {
    WorkQueue q;
    for (std::uint64_t i = 1; i <= 5; ++i) q.push(complete(i));
    CHECK(reqs(q.take(2)) == std::vector<std::uint64_t>{1, 2});
    q.close();
    CHECK(reqs(q.take(2)) == std::vector<std::uint64_t>{3, 4});
    CHECK(reqs(q.take(2)) == std::vector<std::uint64_t>{5});
    CHECK(q.take(2).empty());
}

TEST_CASE("work queue: a mixed take joins completions to one organization's claims",
          "[work_queue][mixed]") {
    WorkQueue q;
    q.push(complete(1));
    q.push(claim(1, 2));
    q.push(claim(2, 3));  // another organization: a batch of its own
    auto other_queues = claim(1, 4);
    other_queues.ask.queues = {"electrical"};  // other queues: a batch of its own
    q.push(std::move(other_queues));
    q.push(renew(5));
    q.push(complete(6));
    q.push(claim(1, 7));
    auto failure = request(RequestKind::Fail, 1, 8);  // not mixed: its own batch
    q.push(std::move(failure));

    CHECK(reqs(q.take(128, true)) == std::vector<std::uint64_t>{5});
    // The head is a completion: every later completion joins, and the claims of the first
    // claim's organization and queues.
    CHECK(reqs(q.take(128, true)) == std::vector<std::uint64_t>{1, 2, 6, 7});
    auto next = q.take(128, true);
    CHECK(reqs(next) == std::vector<std::uint64_t>{3});
    CHECK(reqs(q.take(128, true)) == std::vector<std::uint64_t>{4});
    CHECK(reqs(q.take(128, true)) == std::vector<std::uint64_t>{8});
    CHECK(q.size() == 0);

    // Without `mixed`, each kind is a batch of its own.
    q.push(complete(1));
    q.push(claim(1, 2));
    q.push(complete(3));
    CHECK(reqs(q.take(128)) == std::vector<std::uint64_t>{1, 3});
    CHECK(reqs(q.take(128)) == std::vector<std::uint64_t>{2});
}

TEST_CASE("work queue: a completion and the claim it carries are never taken apart",
          "[work_queue][complete_claim]") {
    const auto follower = [](store::OrgId org, std::uint64_t ticket) {
        auto r = claim(org, ticket);
        r.follows = true;
        return r;
    };
    WorkQueue q;
    // Mixed: the pair joins a batch whose first claim serves the same organization and queues.
    q.push(claim(1, 1));
    q.push_pair(complete(2), follower(1, 3));
    q.push_pair(complete(4), follower(2, 5));  // its claim is another organization's: left whole
    q.push(complete(6));
    CHECK(reqs(q.take(128, true)) == std::vector<std::uint64_t>{1, 2, 3, 6});
    CHECK(reqs(q.take(128, true)) == std::vector<std::uint64_t>{4, 5});
    CHECK(q.size() == 0);

    // At the batch's size limit a pair still comes whole, one past the limit.
    q.push(complete(1));
    q.push_pair(complete(2), follower(1, 3));
    CHECK(reqs(q.take(2, true)) == std::vector<std::uint64_t>{1, 2, 3});

    // Without `mixed`: the pair goes alone, in order, and other completions pass it by.
    q.push(complete(1));
    q.push_pair(complete(2), follower(1, 3));
    q.push(complete(4));
    CHECK(reqs(q.take(128)) == std::vector<std::uint64_t>{1, 4});
    CHECK(reqs(q.take(128)) == std::vector<std::uint64_t>{2, 3});
    CHECK(q.size() == 0);
}

TEST_CASE("work queue: requests pushed while held wake a taker once, all together",
          "[work_queue][hold]") {
    WorkQueue q;
    std::latch waiting(1);
    std::vector<DbRequest> taken;
    std::thread taker([&] {
        waiting.count_down();
        taken = q.take(128, true);
    });
    waiting.wait();
    {
        const HeldQueue held(q);
        for (std::uint64_t t = 1; t <= 3; ++t) q.push(claim(1, t));
    }
    taker.join();
    // Woken at the release, the taker finds the whole round: one batch, not the first alone.
    CHECK(reqs(taken) == std::vector<std::uint64_t>{1, 2, 3});
    CHECK(q.size() == 0);
}

TEST_CASE("work queue: the renewals of one RENEW are taken whole, beyond the batch size",
          "[work_queue][renew_held]") {
    const auto group_of = [](std::uint64_t first, std::uint64_t n) {
        std::vector<DbRequest> g;
        for (std::uint64_t i = 0; i < n; ++i) {
            g.push_back(renew(first + i));
            g.back().group = first;
        }
        return g;
    };
    WorkQueue q;
    q.push(claim(1, 1));
    q.push(renew(2));
    q.push_group(group_of(10, 5));
    q.push(renew(3));
    q.push_group(group_of(20, 3));
    q.push(renew(4));
    CHECK(q.size() == 12);
    // The oldest renewal alone, then the first group does not fit a batch of 4: the loose
    // renewal after it does, and the next group does not.
    CHECK(reqs(q.take(4)) == std::vector<std::uint64_t>{2, 3, 4});
    // A group at the head is taken whole even though it is larger than the batch.
    CHECK(reqs(q.take(4)) == std::vector<std::uint64_t>{10, 11, 12, 13, 14});
    // Without coalescing (batches of one) a group is still one take: one statement.
    CHECK(reqs(q.take(1)) == std::vector<std::uint64_t>{20, 21, 22});
    CHECK(reqs(q.take(4)) == std::vector<std::uint64_t>{1});
    CHECK(q.size() == 0);
}

namespace {

/// A taker with an hour's patience on a thread of its own, constructed once that thread is about
/// to take; `took` holds what it took after join().
struct SpillTaker {
    std::latch taking{1};
    std::vector<DbRequest> took;
    std::atomic<bool> done{false};
    std::thread thread;

    explicit SpillTaker(WorkQueue& q)
        : thread([this, &q] {
              taking.count_down();
              took = q.take(128, false, std::chrono::hours(1));
              done = true;
          }) {
        taking.wait();
    }
    SpillTaker(const SpillTaker&) = delete;
    SpillTaker& operator=(const SpillTaker&) = delete;
    ~SpillTaker() {
        if (thread.joinable()) thread.join();
    }
    void join() { thread.join(); }
};

}  // namespace

TEST_CASE("work queue: a spill taker takes only what waited past its patience", "[work_queue]") {
    WorkQueue q;
    const auto now = SteadyClock::now();
    auto fresh = claim(1, 1);
    fresh.dispatched_at = now;
    auto old = claim(2, 2);
    old.dispatched_at = now - std::chrono::hours(2);
    q.push(std::move(fresh));

    SpillTaker spill(q);
    // The fresh claim stays for a taker without patience, whenever the spill taker got there;
    // the old one behind it goes to the spill taker once it is at the head.
    q.push(std::move(old));
    CHECK(reqs(q.take(128)) == std::vector<std::uint64_t>{1});
    spill.join();
    CHECK(reqs(spill.took) == std::vector<std::uint64_t>{2});
}

TEST_CASE("work queue: a spill taker gives up its wait when the queue closes", "[work_queue]") {
    WorkQueue q;
    auto fresh = claim(1, 1);
    fresh.dispatched_at = SteadyClock::now();
    q.push(std::move(fresh));
    SpillTaker spill(q);
    q.close();
    spill.join();
    // After close the remaining requests are still handed out, patience or not.
    CHECK(reqs(spill.took) == std::vector<std::uint64_t>{1});
}

TEST_CASE("work queue: a spill taker waiting for work takes what waited too long, none other there",
          "[work_queue]") {
    WorkQueue q;
    SpillTaker spill(q);
    // No taker without patience waits: the push must wake the spill taker, which finds the
    // request past its patience (whether it was already waiting or not yet).
    auto old = claim(1, 1);
    old.dispatched_at = SteadyClock::now() - std::chrono::hours(2);
    q.push(std::move(old));
    const auto limit = SteadyClock::now() + std::chrono::seconds(10);
    while (!spill.done && SteadyClock::now() < limit) std::this_thread::yield();
    const bool took = spill.done;
    // A spill taker never woken would wait its hour: closing ends that wait, and the test fails.
    if (!took) q.close();
    spill.join();
    CHECK(took);
    CHECK(reqs(spill.took) == std::vector<std::uint64_t>{1});
}

namespace {

DbRequest big_claim(store::OrgId org, std::uint64_t ticket, int max_jobs) {
    auto r = claim(org, ticket);
    r.ask.max_jobs = max_jobs;
    return r;
}

}  // namespace

TEST_CASE("work queue: a flood from one organization delays another's claim by one batch",
          "[work_queue][fair]") {
    WorkQueue q;
    // Organization 2 queues 300 claims of 100 jobs each, then organization 1 one claim of one.
    for (std::uint64_t t = 1; t <= 300; ++t) q.push(big_claim(2, t, 100));
    q.push(claim(1, 1000));
    // Organization 2's turn: with another organization waiting its batch asks for at most
    // kFairShareJobs jobs, so the batch organization 1 waits behind is short.
    const auto first = q.take(128, true);
    REQUIRE_FALSE(first.empty());
    CHECK(first.front().ask.org_id == 2);
    CHECK(first.size() == WorkQueue::kFairShareJobs / 100);
    // Then organization 1's, not the rest of the flood.
    CHECK(reqs(q.take(128, true)) == std::vector<std::uint64_t>{1000});
    // Organization 1 pushed work within the share window: organization 2's batches stay short,
    // so that organization 1's next claim waits behind a short one too.
    CHECK(q.take(128, true).size() == WorkQueue::kFairShareJobs / 100);
}

TEST_CASE("work queue: organizations take turns, each in its own arrival order",
          "[work_queue][fair]") {
    WorkQueue q;
    for (std::uint64_t t = 1; t <= 4; ++t) q.push(claim(2, t));
    q.push(claim(1, 10));
    q.push(complete(11));  // organization 1's too
    q.push(claim(3, 20));
    std::vector<std::vector<std::uint64_t>> taken;
    for (int i = 0; i < 5 && q.size() > 0; ++i) taken.push_back(reqs(q.take(2)));
    CHECK(taken == std::vector<std::vector<std::uint64_t>>{{1, 2}, {10}, {20}, {3, 4}, {11}});
}

TEST_CASE("work queue: one organization alone is batched as before, whatever it asks for",
          "[work_queue][fair]") {
    WorkQueue q;
    for (std::uint64_t t = 1; t <= 200; ++t) q.push(big_claim(5, t, 100));
    CHECK(q.take(128, true).size() == 128);
    CHECK(q.take(128, true).size() == 72);
}

TEST_CASE("work queue: a second taker takes the organization the first one is not busy with",
          "[work_queue][fair]") {
    WorkQueue q;
    for (std::uint64_t t = 1; t <= 300; ++t) q.push(big_claim(2, t, 100));
    WorkQueue::Taker first;
    const auto flood = q.take(128, true, {}, &first);
    REQUIRE_FALSE(flood.empty());
    CHECK(flood.front().ask.org_id == 2);
    // While the first taker runs organization 2's batch, organization 1's claim arrives behind
    // the rest of the flood; another taker (a real thread, as a DB thread is) takes it first.
    q.push(claim(1, 1000));
    WorkQueue::Taker second;
    std::vector<DbRequest> took;
    std::thread other([&] { took = q.take(128, true, {}, &second); });
    other.join();
    CHECK(reqs(took) == std::vector<std::uint64_t>{1000});
    // Once the first taker comes back, organization 2 is its own again.
    const auto next = q.take(128, true, {}, &first);
    REQUIRE_FALSE(next.empty());
    CHECK(next.front().ask.org_id == 2);
}

TEST_CASE("work queue: while another organization is active, one leaves a taker free for it",
          "[work_queue][fair]") {
    WorkQueue q;
    for (std::uint64_t t = 1; t <= 300; ++t) q.push(big_claim(2, t, 100));
    q.push(claim(1, 1000));
    WorkQueue::Taker first;
    WorkQueue::Taker second;
    // Both takers are counted; organization 2's batch goes to the first, organization 1's to the
    // second.
    CHECK(q.take(128, true, {}, &first).front().ask.org_id == 2);
    CHECK(reqs(q.take(128, true, {}, &second)) == std::vector<std::uint64_t>{1000});
    // The second comes back while the first still runs organization 2's batch: organization 1 was
    // active a moment ago, so it must not take organization 2's work and leave none free. It
    // waits, on a real thread, until organization 1's next claim arrives, and takes that.
    std::vector<DbRequest> took;
    std::latch started(1);
    std::thread second_thread([&] {
        started.count_down();
        took = q.take(128, true, {}, &second);
    });
    started.wait();
    q.push(claim(1, 1001));
    second_thread.join();
    CHECK(reqs(took) == std::vector<std::uint64_t>{1001});
    // The first, back from its batch, takes organization 2's work again.
    CHECK(q.take(128, true, {}, &first).front().ask.org_id == 2);
}
