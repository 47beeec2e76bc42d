// Retention without a database: the checker's and recovery's reading of the prune ledger, and the
// archive format's round trip and its refusals.

#include <catch2/catch.hpp>
#include <sstream>

#include "common/ops/checker.hpp"
#include "common/ops/event_archive.hpp"
#include "common/ops/recovery.hpp"
#include "tests/support/checker_support.hpp"

using namespace aclaim::base;
using namespace aclaim::ops;
using namespace aclaim::store;
using aclaim::testing::caught;

namespace {

/// Job 7 completed and job 8 pending; both with their whole history.
History two_jobs() {
    History h;
    h.jobs.push_back({7, 1, "completed", 1, std::string("ref"), std::nullopt});
    h.jobs.push_back({8, 1, "pending", 0, std::nullopt, std::nullopt});
    std::int64_t id = 0;
    auto ev = [&](JobId job, const char* kind, Generation g, Micros at) {
        h.events.push_back({++id, job, 1, g, kind, g > 0 ? "w" : "", instant_from_micros(at), ""});
    };
    ev(7, "enqueued", 0, 100);
    ev(8, "enqueued", 0, 110);
    ev(7, "claimed", 1, 200);
    ev(7, "completed", 1, 300);
    ev(7, "rejected", 1, 400);
    h.results.push_back({7, 1, 1, "ref"});
    return h;
}

/// Job 7 as retention leaves it: row and result gone, recorded in the ledger.
History pruned_seven() {
    History h = two_jobs();
    h.jobs.erase(h.jobs.begin());
    h.results.clear();
    h.pruned.push_back({1, 5, 8});  // ids 5, 6 and 7
    return h;
}

}  // namespace

TEST_CASE("a pruned job is absent, not lost", "[checker][retention]") {
    SECTION("its row and result gone and its id in the ledger: clean") {
        const auto r = check(pruned_seven());
        INFO((r.violations.empty() ? "" : r.violations[0].evidence));
        CHECK(r.ok());
        CHECK(r.pruned == 3);
        CHECK(r.pruned_with_history == 1);
    }
    SECTION("its history archived as well: clean") {
        History h = pruned_seven();
        std::erase_if(h.events, [](const AuditEvent& e) { return e.job_id == 7; });
        const auto r = check(h);
        CHECK(r.ok());
        CHECK(r.pruned_with_history == 0);
    }
    SECTION("gone without a ledger entry: lost") {
        History h = pruned_seven();
        h.pruned.clear();
        CHECK(caught(h, Invariant::NothingLost));
    }
    SECTION("a ledger entry for a job that is still there") {
        History h = two_jobs();
        h.pruned.push_back({1, 8, 9});
        CHECK(caught(h, Invariant::PrunedIsAbsent));
    }
    SECTION("its result left behind") {
        History h = pruned_seven();
        h.results.push_back({7, 1, 1, "ref"});
        CHECK(caught(h, Invariant::PrunedIsAbsent));
        CHECK_FALSE(caught(h, Invariant::NothingLost));
    }
    SECTION("pruned while its history says it was still running, waiting or quarantined") {
        for (const char* last : {"claimed", "reclaimed", "quarantined"}) {
            History h = pruned_seven();
            h.events.push_back({99, 8, 1, 2, last, "w", instant_from_micros(500), ""});
            h.jobs.erase(h.jobs.begin());  // job 8 pruned too
            h.pruned.push_back({1, 8, 9});
            INFO(last);
            CHECK(caught(h, Invariant::PrunedWasFinished));
        }
        History pending = pruned_seven();
        pending.jobs.clear();
        pending.pruned.push_back({1, 8, 9});
        CHECK(caught(pending, Invariant::PrunedWasFinished));
    }
}

TEST_CASE("recovery counts the events of a pruned job as no orphan, a left result as one",
          "[recovery][retention]") {
    EventSummary events;
    events.total = 3;
    events.orgs = {1};
    const ResultRecord result{7, 1, 1, "ref"};
    CHECK(orphan_of(7, std::nullopt, events)->reason == "orphan_events");
    CHECK_FALSE(orphan_of(7, std::nullopt, events, true));
    CHECK(orphan_of(7, result, events, true)->reason == "pruned_result_left");
    CHECK(orphan_of(7, result, std::nullopt, false)->reason == "orphan_result");
}

namespace {

ArchiveHeader header() {
    return {"job_events_2026_01", instant_from_micros(1'767'225'600'000'000),
            instant_from_micros(1'769'904'000'000'000), instant_from_micros(1'780'000'000'000'000)};
}

std::string archive_of(const std::vector<AuditEvent>& events) {
    std::ostringstream out;
    ArchiveWriter w(out, header());
    for (const auto& e : events) w.add(e);
    w.finish();
    return out.str();
}

std::vector<AuditEvent> sample() {
    const Micros t = 1'767'225'600'000'000;
    return {{10, 7, 1, 0, "enqueued", "", instant_from_micros(t + 1), "queue default"},
            {11, 7, 1, 1, "claimed", "w-1", instant_from_micros(t + 2), ""},
            {14, 7, 1, 1, "completed", "w-1", instant_from_micros(t + 3),
             "ref with \"quotes\", a tab\t and ünïcode"}};
}

ArchiveContents read(const std::string& text, std::vector<AuditEvent>* out = nullptr) {
    std::istringstream in(text);
    return read_archive(in, [&](const AuditEvent& e) {
        if (out) out->push_back(e);
    });
}

}  // namespace

TEST_CASE("an archive reads back exactly what was written, verified", "[archive]") {
    const auto events = sample();
    const std::string text = archive_of(events);
    std::vector<AuditEvent> back;
    const auto c = read(text, &back);
    CHECK(c.header.partition == "job_events_2026_01");
    CHECK(c.header.from == header().from);
    CHECK(c.header.to == header().to);
    CHECK(c.summary.rows == 3);
    CHECK(c.summary.min_id == 10);
    CHECK(c.summary.max_id == 14);
    CHECK(c.summary.sha256.size() == 64);
    REQUIRE(back.size() == events.size());
    for (std::size_t i = 0; i < events.size(); ++i) {
        CHECK(back[i].id == events[i].id);
        CHECK(back[i].job_id == events[i].job_id);
        CHECK(back[i].org_id == events[i].org_id);
        CHECK(back[i].generation == events[i].generation);
        CHECK(back[i].kind == events[i].kind);
        CHECK(back[i].worker == events[i].worker);
        CHECK(back[i].at == events[i].at);
        CHECK(back[i].detail == events[i].detail);
    }
    // The legacy partition has an open lower bound.
    std::ostringstream open;
    ArchiveWriter w(open, {"job_events_legacy", std::nullopt, header().to, header().archived_at});
    w.finish();
    CHECK_FALSE(read(open.str()).header.from);
}

TEST_CASE("a truncated, altered or foreign archive is refused", "[archive]") {
    const std::string text = archive_of(sample());
    SECTION("truncated: no trailer") {
        const auto cut = text.substr(0, text.rfind("{\"end\""));
        CHECK_THROWS_WITH(read(cut), Catch::Contains("truncated"));
    }
    SECTION("an event altered") {
        std::string altered = text;
        altered.replace(altered.find("w-1"), 3, "w-2");
        CHECK_THROWS_WITH(read(altered), Catch::Contains("SHA-256"));
    }
    SECTION("an event dropped") {
        std::string dropped = text;
        const auto at = dropped.find("{\"at\"");
        dropped.erase(at, dropped.find('\n', at) + 1 - at);
        CHECK_THROWS_WITH(read(dropped), Catch::Contains("counts"));
    }
    SECTION("not an archive") {
        CHECK_THROWS_WITH(read("{\"format\":\"something\"}\n"), Catch::Contains("not an aclaim"));
        CHECK_THROWS(read(""));
    }
    SECTION("an event outside the partition's range") {
        auto events = sample();
        events[0].at = instant_from_micros(1);
        CHECK_THROWS_WITH(read(archive_of(events)), Catch::Contains("outside"));
    }
    SECTION("the writer refuses events out of id order") {
        std::ostringstream out;
        ArchiveWriter w(out, header());
        w.add(sample()[1]);
        CHECK_THROWS(w.add(sample()[0]));
    }
}
