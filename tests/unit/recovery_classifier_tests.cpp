// The recovery classifier on hand-built rows: every class, every contradiction it knows, and the
// operator's resolution that acknowledges a contradiction already decided on.

#include <catch2/catch.hpp>

#include "common/ops/recovery.hpp"

using namespace aclaim::base;
using namespace aclaim::ops;
using namespace aclaim::store;

namespace {

constexpr Instant kNow = instant_from_micros(1'800'000'000'000'000);
constexpr OrgId kOrg = 7;

AuditEvent event(std::int64_t id, std::string kind, Generation g, std::string detail = "",
                 OrgId org = kOrg) {
    return AuditEvent{
        id, 1, org, g, std::move(kind), "rev-1", kNow - 60 * kSeconds, std::move(detail)};
}

/// A log with claims up to generation g (each in the row's organization).
EventSummary claimed_up_to(Generation g) {
    EventSummary s;
    s.total = 1 + g;
    s.orgs = {kOrg};
    if (g > 0) {
        s.latest_claim = event(10 + g, "claimed", g);
        s.top = s.latest_claim;
        s.max_generation = g;
    }
    return s;
}

EventSummary with_completion(EventSummary s, Generation g, const std::string& ref) {
    s.latest_completion = event(100 + s.completions, "completed", g, ref);
    ++s.completions;
    s.completion_generations.push_back(g);
    ++s.total;
    if (g >= s.max_generation) {
        s.max_generation = g;
        s.top = s.latest_completion;
    }
    return s;
}

JobRecord pending_row(Generation g = 0) {
    JobRecord r;
    r.id = 42;
    r.org_id = kOrg;
    r.state = JobState::Pending;
    r.generation = g;
    r.attempts = static_cast<int>(g);
    r.max_attempts = 3;
    return r;
}

JobRecord assigned_row(Generation g, Instant lease_end) {
    JobRecord r = pending_row(g);
    r.state = JobState::Assigned;
    r.assignee = "rev-1";
    r.claimed_at = lease_end - 30 * kSeconds;
    r.lease_expires_at = lease_end;
    return r;
}

JobRecord completed_row(Generation g, const std::string& ref) {
    JobRecord r = pending_row(g);
    r.state = JobState::Completed;
    r.assignee = "rev-1";
    r.claimed_at = kNow - 90 * kSeconds;
    r.completed_at = kNow - 60 * kSeconds;
    r.result_ref = ref;
    return r;
}

JobRecord failed_row(Generation g) {
    JobRecord r = pending_row(g);
    r.state = JobState::Failed;
    r.assignee = "rev-1";
    r.completed_at = kNow - 60 * kSeconds;
    r.last_error = "reviewer gave up";
    return r;
}

ResultRecord result(Generation g, const std::string& ref, OrgId org = kOrg) {
    return ResultRecord{42, org, g, ref, kNow - 60 * kSeconds};
}

/// The codes of every finding, in report order.
std::vector<Contradiction> codes(const Classification& c) {
    std::vector<Contradiction> out;
    for (const auto& f : c.findings) out.push_back(f.code);
    return out;
}

}  // namespace

TEST_CASE("consistent rows fall into the four plain classes", "[recovery]") {
    SECTION("a fresh pending job") {
        const auto c = classify(pending_row(), std::nullopt, claimed_up_to(0), kNow);
        CHECK(c.cls == RecoveryClass::Pending);
        CHECK(c.findings.empty());
        CHECK(c.reason().empty());
    }
    SECTION("a pending job reclaimed after generation 2") {
        auto events = claimed_up_to(2);
        const auto c = classify(pending_row(2), std::nullopt, events, kNow);
        CHECK(c.cls == RecoveryClass::Pending);
    }
    SECTION("a lease that ends after now is live") {
        const auto c =
            classify(assigned_row(1, kNow + Duration(1)), std::nullopt, claimed_up_to(1), kNow);
        CHECK(c.cls == RecoveryClass::Live);
    }
    SECTION("a lease that ends exactly at now has expired, as the reaper decides") {
        const auto c = classify(assigned_row(1, kNow), std::nullopt, claimed_up_to(1), kNow);
        CHECK(c.cls == RecoveryClass::Expired);
    }
    SECTION("a lease that ended during the outage has expired") {
        const auto c =
            classify(assigned_row(3, kNow - 300 * kSeconds), std::nullopt, claimed_up_to(3), kNow);
        CHECK(c.cls == RecoveryClass::Expired);
    }
    SECTION("a completed job with its result and its completion event is terminal") {
        const auto c = classify(completed_row(2, "r/42"), result(2, "r/42"),
                                with_completion(claimed_up_to(2), 2, "r/42"), kNow);
        CHECK(c.cls == RecoveryClass::Terminal);
        CHECK(c.evidence.empty());
    }
    SECTION("a failed job is terminal") {
        const auto c = classify(failed_row(3), std::nullopt, claimed_up_to(3), kNow);
        CHECK(c.cls == RecoveryClass::Terminal);
    }
}

TEST_CASE("an already quarantined row stays inconsistent with its recorded reason", "[recovery]") {
    auto row = assigned_row(3, kNow + 60 * kSeconds);
    row.state = JobState::Quarantined;
    row.quarantined_from = "assigned";
    row.quarantine_reason = "result_for_unfinished_row: job_results publishes generation 3";
    const auto c = classify(row, result(3, "r/42"), claimed_up_to(3), kNow);
    CHECK(c.cls == RecoveryClass::Inconsistent);
    REQUIRE(codes(c) == std::vector<Contradiction>{Contradiction::AlreadyQuarantined});
    CHECK(c.reason() == "already_quarantined");
    CHECK_THAT(c.findings[0].what, Catch::Contains("quarantined from assigned") &&
                                       Catch::Contains("job_results publishes generation 3"));
}

TEST_CASE("a result published while the row is still assigned is a contradiction", "[recovery]") {
    // The dataset's contradictory row: the outbox says generation 3 finished, the row says
    // generation 3 still holds a lease. Reclaiming it would hand out generation 4, whose result
    // could never be published beside the one that exists.
    const auto expired = assigned_row(3, kNow - 120 * kSeconds);
    const auto c = classify(expired, result(3, "r/42"), claimed_up_to(3), kNow);
    CHECK(c.cls == RecoveryClass::Inconsistent);  // not expired: it must not be reclaimed
    REQUIRE(codes(c) == std::vector<Contradiction>{Contradiction::ResultForUnfinishedRow});
    CHECK_THAT(c.findings[0].what, Catch::Contains("publishes generation 3") &&
                                       Catch::Contains("assigned at generation 3"));
    CHECK_THAT(c.evidence, Catch::StartsWith("row: ") && Catch::Contains("\nresult: ") &&
                               Catch::Contains("ref='r/42'") && Catch::Contains("\nevents: "));
}

TEST_CASE("results that do not match the row are contradictions", "[recovery]") {
    const auto events = with_completion(claimed_up_to(2), 2, "r/42");
    SECTION("a failed row with a published result") {
        const auto c = classify(failed_row(2), result(2, "r/42"), claimed_up_to(2), kNow);
        CHECK(codes(c) == std::vector<Contradiction>{Contradiction::ResultForUnfinishedRow});
    }
    SECTION("a pending row with a published result") {
        const auto c = classify(pending_row(2), result(2, "r/42"), claimed_up_to(2), kNow);
        CHECK(codes(c) == std::vector<Contradiction>{Contradiction::ResultForUnfinishedRow});
    }
    SECTION("a completed row without a result") {
        const auto c = classify(completed_row(2, "r/42"), std::nullopt, events, kNow);
        CHECK(codes(c) == std::vector<Contradiction>{Contradiction::CompletedWithoutResult});
        CHECK_THAT(c.evidence, Catch::Contains("result: none"));
    }
    SECTION("a result of another generation") {
        const auto c = classify(completed_row(2, "r/42"), result(1, "r/42"), events, kNow);
        CHECK(codes(c) == std::vector<Contradiction>{Contradiction::ResultMismatch});
    }
    SECTION("a result with another ref") {
        const auto c = classify(completed_row(2, "r/42"), result(2, "r/other"), events, kNow);
        CHECK(codes(c) == std::vector<Contradiction>{Contradiction::ResultMismatch});
    }
    SECTION("a result in another organization") {
        const auto c =
            classify(completed_row(2, "r/42"), result(2, "r/42", kOrg + 1), events, kNow);
        CHECK(codes(c) == std::vector<Contradiction>{Contradiction::ResultMismatch});
        CHECK_THAT(c.findings[0].what, Catch::Contains("organization 8"));
    }
}

TEST_CASE("generations the log does not back are contradictions", "[recovery]") {
    SECTION("the row is behind the latest claim in its log") {
        const auto c =
            classify(assigned_row(2, kNow + 60 * kSeconds), std::nullopt, claimed_up_to(3), kNow);
        CHECK(c.cls == RecoveryClass::Inconsistent);
        REQUIRE(codes(c) == std::vector<Contradiction>{Contradiction::GenerationBehindLog});
        CHECK_THAT(c.findings[0].what, Catch::Contains("generation 3") &&
                                           Catch::Contains("claimed") &&
                                           Catch::Contains("assigned at generation 2"));
    }
    SECTION("a pending row behind its log") {
        const auto c = classify(pending_row(1), std::nullopt, claimed_up_to(2), kNow);
        CHECK(codes(c) == std::vector<Contradiction>{Contradiction::GenerationBehindLog});
    }
    SECTION("the row holds a generation no claim granted") {
        const auto c =
            classify(assigned_row(3, kNow + 60 * kSeconds), std::nullopt, claimed_up_to(2), kNow);
        CHECK(codes(c) == std::vector<Contradiction>{Contradiction::ClaimMissingFromLog});
    }
    SECTION("a claimed row with no log at all") {
        const auto c =
            classify(assigned_row(1, kNow + 60 * kSeconds), std::nullopt, EventSummary{}, kNow);
        CHECK(codes(c) == std::vector<Contradiction>{Contradiction::ClaimMissingFromLog});
        CHECK_THAT(c.findings[0].what, Catch::Contains("latest grant is none"));
    }
}

TEST_CASE("saved progress is checked against the generations the row reached", "[recovery]") {
    const auto live = assigned_row(3, kNow + 60 * kSeconds);
    SECTION("a report of the current or an earlier generation is history") {
        for (const Generation g : {Generation{1}, Generation{3}}) {
            const auto c =
                classify(live, std::nullopt, claimed_up_to(3), kNow, ProgressMark{g, kOrg});
            CHECK(c.cls == RecoveryClass::Live);
            CHECK(c.findings.empty());
        }
        const auto done =
            classify(completed_row(2, "r/42"), result(2, "r/42"),
                     with_completion(claimed_up_to(2), 2, "r/42"), kNow, ProgressMark{2, kOrg});
        CHECK(done.cls == RecoveryClass::Terminal);
    }
    SECTION("a report of a generation the row never reached") {
        const auto c = classify(live, std::nullopt, claimed_up_to(3), kNow, ProgressMark{4, kOrg});
        CHECK(c.cls == RecoveryClass::Inconsistent);
        REQUIRE(codes(c) ==
                std::vector<Contradiction>{Contradiction::ProgressOfUngrantedGeneration});
        CHECK(c.reason() == "progress_of_ungranted_generation");
        CHECK_THAT(c.findings[0].what,
                   Catch::Contains("generation 4") && Catch::Contains("assigned at generation 3"));
        CHECK_THAT(c.evidence, Catch::Contains("progress: generation 4, organization 7"));
    }
    SECTION("a report of a pending row that was never claimed") {
        const auto c =
            classify(pending_row(0), std::nullopt, EventSummary{}, kNow, ProgressMark{1, kOrg});
        CHECK(codes(c) == std::vector<Contradiction>{Contradiction::ProgressOfUngrantedGeneration});
    }
    SECTION("a report of another organization") {
        const auto c =
            classify(live, std::nullopt, claimed_up_to(3), kNow, ProgressMark{3, kOrg + 1});
        CHECK(codes(c) == std::vector<Contradiction>{Contradiction::ForeignOrganizationProgress});
        CHECK_THAT(c.findings[0].what, Catch::Contains("organization 8"));
    }
    SECTION("a quarantined row keeps its own reason") {
        auto row = live;
        row.state = JobState::Quarantined;
        row.quarantined_from = "assigned";
        row.quarantine_reason = "earlier";
        const auto c = classify(row, std::nullopt, claimed_up_to(3), kNow, ProgressMark{9, kOrg});
        CHECK(codes(c) == std::vector<Contradiction>{Contradiction::AlreadyQuarantined});
    }
}

TEST_CASE("completion events that do not match the row are contradictions", "[recovery]") {
    SECTION("a completed row whose completion is missing from the log") {
        const auto c =
            classify(completed_row(2, "r/42"), result(2, "r/42"), claimed_up_to(2), kNow);
        CHECK(codes(c) == std::vector<Contradiction>{Contradiction::CompletionEventMissing});
    }
    SECTION("the logged completion carries another generation") {
        auto events = with_completion(claimed_up_to(2), 1, "r/42");
        const auto c = classify(completed_row(2, "r/42"), result(2, "r/42"), events, kNow);
        CHECK(codes(c) == std::vector<Contradiction>{Contradiction::CompletionEventMismatch});
    }
    SECTION("the logged completion carries another ref") {
        auto events = with_completion(claimed_up_to(2), 2, "r/other");
        const auto c = classify(completed_row(2, "r/42"), result(2, "r/42"), events, kNow);
        CHECK(codes(c) == std::vector<Contradiction>{Contradiction::CompletionEventMismatch});
    }
    SECTION("two accepted completions") {
        auto events = with_completion(with_completion(claimed_up_to(2), 1, "r/1"), 2, "r/42");
        const auto c = classify(completed_row(2, "r/42"), result(2, "r/42"), events, kNow);
        CHECK(codes(c) == std::vector<Contradiction>{Contradiction::CompletedMoreThanOnce});
        CHECK_THAT(c.findings[0].what, Catch::Contains("generations 1,2"));
    }
    SECTION("a completion logged for a row that is still assigned") {
        auto events = with_completion(claimed_up_to(2), 2, "r/42");
        const auto c = classify(assigned_row(2, kNow + 60 * kSeconds), std::nullopt, events, kNow);
        CHECK(codes(c) ==
              std::vector<Contradiction>{Contradiction::CompletionLoggedForUnfinishedRow});
    }
}

TEST_CASE("events of another organization are a contradiction", "[recovery]") {
    auto events = claimed_up_to(1);
    events.orgs = {kOrg, kOrg + 2};
    const auto c = classify(assigned_row(1, kNow + 60 * kSeconds), std::nullopt, events, kNow);
    CHECK(codes(c) == std::vector<Contradiction>{Contradiction::ForeignOrganizationEvents});
    CHECK_THAT(c.findings[0].what,
               Catch::Contains("organization 9") && Catch::Contains("belongs to organization 7"));
}

TEST_CASE("several contradictions are all reported, the gravest first", "[recovery]") {
    auto events = with_completion(claimed_up_to(3), 3, "r/42");
    events.orgs = {kOrg, kOrg + 1};
    const auto c = classify(assigned_row(2, kNow - kSeconds), result(3, "r/42"), events, kNow);
    CHECK(codes(c) == std::vector<Contradiction>{Contradiction::ForeignOrganizationEvents,
                                                 Contradiction::GenerationBehindLog,
                                                 Contradiction::ResultForUnfinishedRow,
                                                 Contradiction::CompletionLoggedForUnfinishedRow});
    CHECK(c.reason() == "foreign_organization_events");
    CHECK_THAT(c.explanation(), Catch::Contains("\ngeneration_behind_log: "));
}

TEST_CASE("an operator's resolution acknowledges what it decided on", "[recovery]") {
    // After `quarantine fail`, the row is failed at the highest generation the job saw and the
    // result stays published: that is the operator's decision, not a new contradiction.
    auto events = claimed_up_to(3);
    events.resolution = event(50, "unquarantined", 3, "failed by operator");
    events.completions = 0;
    SECTION("a failed row whose result predates the resolution is terminal") {
        const auto c = classify(failed_row(3), result(3, "r/42"), events, kNow);
        CHECK(c.cls == RecoveryClass::Terminal);
    }
    SECTION("a result newer than the resolution is still a contradiction") {
        const auto c = classify(failed_row(4), result(4, "r/42"), events, kNow);
        CHECK(c.cls == RecoveryClass::Inconsistent);
    }
    SECTION("the resolution vouches for the generation it raised the row to") {
        auto log = claimed_up_to(2);
        log.resolution = event(50, "unquarantined", 3, "released by operator");
        log.max_generation = 3;
        const auto c = classify(pending_row(3), std::nullopt, log, kNow);
        CHECK(c.cls == RecoveryClass::Pending);
    }
}

TEST_CASE("results or events without a job row are orphans", "[recovery]") {
    CHECK_FALSE(orphan_of(5, std::nullopt, std::nullopt));
    const auto by_result = orphan_of(5, result(2, "r/5"), std::nullopt);
    REQUIRE(by_result);
    CHECK(by_result->reason == "orphan_result");
    CHECK(by_result->org_id == kOrg);
    const auto by_events = orphan_of(5, std::nullopt, claimed_up_to(1));
    REQUIRE(by_events);
    CHECK(by_events->reason == "orphan_events");
    CHECK_THAT(by_events->evidence, Catch::StartsWith("row: none"));
}

TEST_CASE("instants are read and written in UTC", "[recovery]") {
    CHECK(parse_instant("1970-01-01T00:00:00Z") == instant_from_micros(0));
    CHECK(parse_instant("@1800000000000000") == instant_from_micros(1'800'000'000'000'000));
    CHECK(parse_instant("2027-01-15T08:00:00.25Z") ==
          parse_instant("2027-01-15T10:00:00.250+02:00"));
    CHECK(parse_instant("2000-02-29 12:00:00Z") == instant_from_micros(951'825'600'000'000));
    CHECK(format_instant(instant_from_micros(951'825'600'000'000)) == "2000-02-29T12:00:00Z");
    CHECK(format_instant(instant_from_micros(951'825'600'000'001)) ==
          "2000-02-29T12:00:00.000001Z");
    CHECK(format_instant(instant_from_micros(-1)) == "1969-12-31T23:59:59.999999Z");
    for (const Instant t : {instant_from_micros(0), kNow, kNow + Duration(123'456),
                            instant_from_micros(-86'400'000'001)}) {
        CHECK(parse_instant(format_instant(t)) == t);
    }
    for (const char* bad :
         {"", "@", "@12x", "2027-01-15", "2027-01-15T08:00:00", "2027-13-01T00:00:00Z",
          "2027-01-15T08:00:00.Z", "yesterday", "2027-01-15T08:00:00+2:00"}) {
        INFO(bad);
        CHECK_FALSE(parse_instant(bad));
    }
}

TEST_CASE("a rate bucket ahead of the clock or above its burst is a queue finding", "[recovery]") {
    const std::int64_t now_us = to_micros(kNow);
    RateBucket b{kOrg, "exports", 2.0, 10, 4.0, now_us};
    CHECK_FALSE(check_rate_bucket(b, kNow));
    b.tokens.reset();
    b.refilled_us.reset();  // never spent from: full
    CHECK_FALSE(check_rate_bucket(b, kNow));
    b.refilled_us = now_us + to_micros(kRateClockTolerance);  // another clock, a little ahead
    CHECK_FALSE(check_rate_bucket(b, kNow));
    b.refilled_us = now_us + 3600 * 1'000'000LL;
    const auto ahead = check_rate_bucket(b, kNow);
    REQUIRE(ahead);
    CHECK(ahead->reason == "rate_bucket_ahead_of_clock");
    CHECK(ahead->queue == "exports");
    CHECK(ahead->org_id == kOrg);
    CHECK_THAT(ahead->what, Catch::Contains("3600 s after now"));
    b.refilled_us = now_us;
    b.tokens = 10.5;
    const auto above = check_rate_bucket(b, kNow);
    REQUIRE(above);
    CHECK(above->reason == "rate_tokens_above_burst");
    CHECK_THAT(above->what, Catch::Contains("10.500 tokens") && Catch::Contains("burst of 10"));
}

TEST_CASE("a parked job is classified parked, before and after its deadline", "[recovery][park]") {
    // Handed to an outside system (protocol 1.6): no lease to reclaim, whatever the deadline says;
    // its callback or the reaper decides it, and recovery neither reclaims nor normalizes it.
    for (const auto deadline : {kNow + 60 * kSeconds, kNow - 60 * kSeconds}) {
        JobRecord r = assigned_row(2, kNow);
        r.state = JobState::Parked;
        r.lease_expires_at.reset();
        r.deadline = deadline;
        const auto c = classify(r, std::nullopt, claimed_up_to(2), kNow);
        CHECK(c.cls == RecoveryClass::Parked);
        CHECK(c.findings.empty());
        CHECK(to_string(c.cls) == "parked");
    }
    // A contradiction still comes first: a result published for a parked row.
    JobRecord r = assigned_row(2, kNow);
    r.state = JobState::Parked;
    r.lease_expires_at.reset();
    const ResultRecord forged{42, kOrg, 2, "ref-forged", kNow};
    CHECK(classify(r, forged, claimed_up_to(2), kNow).cls == RecoveryClass::Inconsistent);
}

TEST_CASE("a waiting job is classified waiting, and a claim in its log contradicts it",
          "[recovery]") {
    auto row = pending_row();
    row.state = JobState::Waiting;
    const auto quiet = classify(row, std::nullopt, claimed_up_to(0), kNow);
    CHECK(quiet.cls == RecoveryClass::Waiting);
    CHECK(quiet.findings.empty());
    CHECK(to_string(RecoveryClass::Waiting) == "waiting");
    // A waiting job was never claimed: a log that granted it a generation says otherwise.
    const auto claimed = classify(row, std::nullopt, claimed_up_to(1), kNow);
    CHECK(claimed.cls == RecoveryClass::Inconsistent);
    CHECK(codes(claimed) == std::vector{Contradiction::GenerationBehindLog});
}
