#include "common/ops/recovery.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>
#include <utility>

#include "common/base/enum_names.hpp"

namespace aclaim::ops {

namespace {

/// In RecoveryClass's declaration order.
constexpr base::EnumNames<RecoveryClass, 7> kClassNames({"terminal", "live", "expired", "pending",
                                                         "inconsistent", "parked", "waiting"});
static_assert(kClassNames.covers(RecoveryClass::Waiting));

/// In Contradiction's declaration order.
constexpr base::EnumNames<Contradiction, 13> kContradictionNames(
    {"already_quarantined", "foreign_organization_events", "generation_behind_log",
     "claim_missing_from_log", "result_for_unfinished_row", "completed_without_result",
     "result_mismatch", "completion_event_missing", "completion_event_mismatch",
     "completed_more_than_once", "completion_logged_for_unfinished_row",
     "progress_of_ungranted_generation", "foreign_organization_progress"});
static_assert(kContradictionNames.covers(Contradiction::ForeignOrganizationProgress));

std::string num(std::int64_t v) {
    return std::to_string(v);
}

std::string opt_text(const std::optional<std::string>& s) {
    return s ? "'" + *s + "'" : "null";
}

std::string opt_time(const std::optional<base::Instant>& t) {
    return t ? format_instant(*t) : "null";
}

std::string join(const std::vector<std::int64_t>& values) {
    std::string out;
    for (const auto v : values) out += (out.empty() ? "" : ",") + num(v);
    return out.empty() ? "none" : out;
}

// Days since 1970-01-01 of a proleptic Gregorian date, and back (H. Hinnant's algorithms): no
// time zone database and no locale is involved, so the tool prints the same text everywhere.
std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
    y -= m <= 2;
    const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
    const auto yoe = static_cast<unsigned>(y - era * 400);
    const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

struct CivilDate {
    std::int64_t y = 0;
    unsigned m = 0;
    unsigned d = 0;
};

CivilDate civil_from_days(std::int64_t z) {
    z += 719468;
    const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    const auto doe = static_cast<unsigned>(z - era * 146097);
    const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    const unsigned mp = (5 * doy + 2) / 153;
    const unsigned d = doy - (153 * mp + 2) / 5 + 1;
    const unsigned m = mp < 10 ? mp + 3 : mp - 9;
    return {static_cast<std::int64_t>(yoe) + era * 400 + (m <= 2), m, d};
}

bool read_digits(std::string_view s, std::size_t& pos, std::size_t n, std::int64_t& out) {
    if (pos + n > s.size()) return false;
    out = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const char ch = s[pos + i];
        if (ch < '0' || ch > '9') return false;
        out = out * 10 + (ch - '0');
    }
    pos += n;
    return true;
}

bool expect(std::string_view s, std::size_t& pos, char ch) {
    if (pos >= s.size() || s[pos] != ch) return false;
    ++pos;
    return true;
}

}  // namespace

std::string_view to_string(RecoveryClass c) {
    return kClassNames(c);
}

std::string_view to_string(Contradiction c) {
    return kContradictionNames(c);
}

std::string Classification::reason() const {
    return findings.empty() ? std::string() : std::string(to_string(findings.front().code));
}

std::string Classification::explanation() const {
    std::string out;
    for (const auto& f : findings) {
        out += (out.empty() ? "" : "\n") + std::string(to_string(f.code)) + ": " + f.what;
    }
    return out;
}

Classification classify(const JobRecord& row, const std::optional<ResultRecord>& result,
                        const EventSummary& events, base::Instant now,
                        const std::optional<ProgressMark>& progress) {
    Classification c;
    auto add = [&c](Contradiction code, std::string what) {
        c.findings.push_back({code, std::move(what)});
    };
    const std::string job = "job " + num(row.id);
    const std::string row_state =
        "the row is " + std::string(to_string(row.state)) + " at generation " + num(row.generation);

    if (row.state == store::JobState::Quarantined) {
        // Set aside earlier: its own reason stands, and nothing about it is decided again here.
        add(Contradiction::AlreadyQuarantined,
            "quarantined from " + row.quarantined_from.value_or("?") + ": " +
                row.quarantine_reason.value_or("(no reason recorded)"));
    } else {
        std::vector<store::OrgId> foreign;
        for (const auto org : events.orgs) {
            if (org != row.org_id) foreign.push_back(org);
        }
        if (!foreign.empty()) {
            add(Contradiction::ForeignOrganizationEvents,
                "the log of " + job + " holds events of organization " + join(foreign) +
                    " but the row belongs to organization " + num(row.org_id));
        }
        if (events.max_generation > row.generation) {
            add(Contradiction::GenerationBehindLog,
                "the log reached generation " + num(events.max_generation) +
                    (events.top ? " (" + describe(*events.top) + ")" : "") + " but " + row_state);
        }
        store::Generation vouched = events.latest_claim ? events.latest_claim->generation : 0;
        if (events.resolution) vouched = std::max(vouched, events.resolution->generation);
        if (row.generation > vouched) {
            add(Contradiction::ClaimMissingFromLog,
                row_state + " but the log's latest grant is " +
                    (vouched > 0 ? "generation " + num(vouched) : "none"));
        }

        const bool completed = row.state == store::JobState::Completed;
        // A result the operator already decided on (published at or below the generation of the
        // latest resolution) is history, not a new contradiction.
        const bool acknowledged =
            result && events.resolution && result->generation <= events.resolution->generation;
        if (result && !acknowledged) {
            if (!completed) {
                add(Contradiction::ResultForUnfinishedRow,
                    "job_results publishes generation " + num(result->generation) + " (ref '" +
                        result->result_ref + "') but " + row_state +
                        "; only the transaction that completes a row publishes its result");
            } else if (result->generation != row.generation ||
                       result->result_ref != row.result_ref.value_or("") ||
                       result->org_id != row.org_id) {
                add(Contradiction::ResultMismatch,
                    "job_results publishes generation " + num(result->generation) + ", ref '" +
                        result->result_ref + "', organization " + num(result->org_id) +
                        " but the row completed generation " + num(row.generation) + ", ref " +
                        opt_text(row.result_ref) + ", organization " + num(row.org_id));
            }
        }
        if (completed && !result) {
            add(Contradiction::CompletedWithoutResult, row_state + " with ref " +
                                                           opt_text(row.result_ref) +
                                                           " but job_results has no row for it");
        }
        if (completed) {
            if (events.completions == 0) {
                add(Contradiction::CompletionEventMissing,
                    row_state + " but the log records no completion");
            } else {
                const auto& last = *events.latest_completion;
                if (last.generation != row.generation ||
                    last.detail != row.result_ref.value_or("")) {
                    add(Contradiction::CompletionEventMismatch,
                        "the logged completion is " + describe(last) +
                            " but the row completed generation " + num(row.generation) +
                            " with ref " + opt_text(row.result_ref));
                }
            }
        }
        if (events.completions > 1) {
            add(Contradiction::CompletedMoreThanOnce, "the log records " + num(events.completions) +
                                                          " completions, at generations " +
                                                          join(events.completion_generations));
        }
        if (!completed && events.completions > 0) {
            add(Contradiction::CompletionLoggedForUnfinishedRow,
                "the log records a completion (" +
                    (events.latest_completion ? describe(*events.latest_completion) : "") +
                    ") but " + row_state);
        }
        // A report stays after its generation moved on (the next holder resumes from it), so
        // one of an earlier generation is history; one the row never reached is not.
        if (progress && progress->generation > row.generation) {
            add(Contradiction::ProgressOfUngrantedGeneration,
                "job_progress holds a report of generation " + num(progress->generation) + " but " +
                    row_state + "; only a holder of a granted generation saves progress");
        }
        if (progress && progress->org_id != row.org_id) {
            add(Contradiction::ForeignOrganizationProgress,
                "job_progress holds a report of organization " + num(progress->org_id) +
                    " but the row belongs to organization " + num(row.org_id));
        }
    }

    if (!c.findings.empty()) {
        std::stable_sort(c.findings.begin(), c.findings.end(),
                         [](const Finding& a, const Finding& b) { return a.code < b.code; });
        c.cls = RecoveryClass::Inconsistent;
        c.evidence = "row: " + describe(row) +
                     "\nresult: " + (result ? describe(*result) : "none") +
                     "\nevents: " + describe(events) +
                     (progress ? "\nprogress: generation " + num(progress->generation) +
                                     ", organization " + num(progress->org_id)
                               : "");
        return c;
    }
    switch (row.state) {
        case store::JobState::Completed:
        case store::JobState::Failed:
        case store::JobState::Discarded:
        case store::JobState::Cancelled:
            c.cls = RecoveryClass::Terminal;
            break;
        case store::JobState::Pending:
        case store::JobState::Scheduled:
            // A scheduled job waits for its run_at as a pending one waits for a worker: nothing
            // holds it, so there is nothing to recover.
            c.cls = RecoveryClass::Pending;
            break;
        case store::JobState::Waiting:
            // Waits for its dependencies: nothing holds it, and it is not normalised to pending
            // (that would run it before them); the ending of its last dependency unblocks it.
            c.cls = RecoveryClass::Waiting;
            break;
        case store::JobState::Assigned:
            // The same boundary as the reaper and the fenced updates: a lease ending at or before
            // now no longer grants anything.
            c.cls = row.lease_expires_at && *row.lease_expires_at > now ? RecoveryClass::Live
                                                                        : RecoveryClass::Expired;
            break;
        case store::JobState::Parked:
            // Handed to an outside system: its callback, or the reaper at the park's deadline,
            // decides it; there is no lease to take back, and the row is not normalized here.
            c.cls = RecoveryClass::Parked;
            break;
        case store::JobState::Quarantined:
            break;  // handled above
    }
    return c;
}

std::optional<QueueFinding> check_rate_bucket(const RateBucket& bucket, base::Instant now) {
    QueueFinding f{bucket.org_id, bucket.queue, "", ""};
    const std::int64_t now_us = base::to_micros(now);
    if (bucket.refilled_us && *bucket.refilled_us - now_us > base::to_micros(kRateClockTolerance)) {
        f.reason = "rate_bucket_ahead_of_clock";
        f.what = "the bucket of queue '" + bucket.queue + "' was last refilled at " +
                 format_instant(base::instant_from_micros(*bucket.refilled_us)) + ", " +
                 num((*bucket.refilled_us - now_us) / 1'000'000) +
                 " s after now: the queue earns no token until the clock passes it";
        return f;
    }
    if (bucket.tokens && *bucket.tokens > static_cast<double>(bucket.burst)) {
        f.reason = "rate_tokens_above_burst";
        char tokens[32];
        std::snprintf(tokens, sizeof tokens, "%.3f", *bucket.tokens);
        f.what = "the bucket of queue '" + bucket.queue + "' holds " + tokens +
                 " tokens, more than its burst of " + num(bucket.burst);
        return f;
    }
    return std::nullopt;
}

std::optional<Orphan> orphan_of(store::JobId job, const std::optional<ResultRecord>& result,
                                const std::optional<EventSummary>& events, bool pruned) {
    if (!result && !events) return std::nullopt;
    if (pruned && !result) return std::nullopt;
    Orphan o;
    o.job_id = job;
    if (result) {
        o.org_id = result->org_id;
        o.reason = pruned ? "pruned_result_left" : "orphan_result";
    } else {
        o.org_id = events->orgs.empty() ? 0 : events->orgs.front();
        o.reason = "orphan_events";
    }
    o.evidence = "row: none\nresult: " + (result ? describe(*result) : "none") +
                 "\nevents: " + (events ? describe(*events) : "none");
    return o;
}

/// Microseconds in a second, for the calendar arithmetic below.
constexpr base::Micros kSecond = 1'000'000;

std::string format_instant(base::Instant t) {
    constexpr base::Micros kDay = 86400 * kSecond;
    std::int64_t days = base::to_micros(t) / kDay;
    base::Micros rest = base::to_micros(t) % kDay;
    if (rest < 0) {
        rest += kDay;
        --days;
    }
    const auto [y, m, d] = civil_from_days(days);
    const auto secs = rest / kSecond;
    const auto micros = rest % kSecond;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%04lld-%02u-%02uT%02lld:%02lld:%02lld",
                  static_cast<long long>(y), m, d, static_cast<long long>(secs / 3600),
                  static_cast<long long>(secs / 60 % 60), static_cast<long long>(secs % 60));
    std::string out = buf;
    if (micros != 0) {
        std::snprintf(buf, sizeof buf, ".%06lld", static_cast<long long>(micros));
        out += buf;
    }
    return out + "Z";
}

std::optional<base::Instant> parse_instant(std::string_view s) {
    if (!s.empty() && s.front() == '@') {
        base::Micros v = 0;
        const auto* end = s.data() + s.size();
        const auto [p, ec] = std::from_chars(s.data() + 1, end, v);
        if (ec != std::errc() || p != end || s.size() == 1) return std::nullopt;
        return base::instant_from_micros(v);
    }
    std::size_t pos = 0;
    std::int64_t y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0;
    if (!read_digits(s, pos, 4, y) || !expect(s, pos, '-') || !read_digits(s, pos, 2, mo) ||
        !expect(s, pos, '-') || !read_digits(s, pos, 2, d)) {
        return std::nullopt;
    }
    if (pos >= s.size() || (s[pos] != 'T' && s[pos] != ' ')) return std::nullopt;
    ++pos;
    if (!read_digits(s, pos, 2, h) || !expect(s, pos, ':') || !read_digits(s, pos, 2, mi) ||
        !expect(s, pos, ':') || !read_digits(s, pos, 2, sec)) {
        return std::nullopt;
    }
    base::Micros fraction = 0;
    if (pos < s.size() && s[pos] == '.') {
        ++pos;
        std::size_t digits = 0;
        base::Micros scale = 100000;
        while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
            if (digits < 6) fraction += (s[pos] - '0') * scale;  // finer digits are truncated
            scale /= 10;
            ++digits;
            ++pos;
        }
        if (digits == 0) return std::nullopt;
    }
    base::Micros offset = 0;
    if (pos < s.size() && s[pos] == 'Z') {
        ++pos;
    } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
        const int sign = s[pos] == '-' ? -1 : 1;
        ++pos;
        std::int64_t oh = 0, om = 0;
        if (!read_digits(s, pos, 2, oh) || !expect(s, pos, ':') || !read_digits(s, pos, 2, om) ||
            oh > 23 || om > 59) {
            return std::nullopt;
        }
        offset = sign * (oh * 3600 + om * 60) * kSecond;
    } else {
        return std::nullopt;  // an instant without a zone would depend on where it is read
    }
    if (pos != s.size() || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60) {
        return std::nullopt;
    }
    const std::int64_t days =
        days_from_civil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d));
    return base::instant_from_micros((days * 86400 + h * 3600 + mi * 60 + sec) * kSecond +
                                     fraction - offset);
}

std::string describe(const JobRecord& r) {
    return "org=" + num(r.org_id) + " state=" + std::string(to_string(r.state)) +
           " generation=" + num(r.generation) + " assignee=" + opt_text(r.assignee) +
           " claimed_at=" + opt_time(r.claimed_at) +
           " lease_expires_at=" + opt_time(r.lease_expires_at) + " attempts=" + num(r.attempts) +
           "/" + num(r.max_attempts) + " completed_at=" + opt_time(r.completed_at) +
           " result_ref=" + opt_text(r.result_ref) + " last_error=" + opt_text(r.last_error) +
           " quarantined_from=" + opt_text(r.quarantined_from);
}

std::string describe(const ResultRecord& r) {
    return "org=" + num(r.org_id) + " generation=" + num(r.generation) + " ref='" + r.result_ref +
           "' published_at=" + format_instant(r.published_at);
}

std::string describe(const store::AuditEvent& e) {
    std::string out = "#" + num(e.id) + " " + e.kind + " generation " + num(e.generation);
    if (!e.worker.empty()) out += " by " + e.worker;
    out += " at " + format_instant(e.at);
    if (e.org_id != 0) out += " org " + num(e.org_id);
    if (!e.detail.empty()) {
        // A quarantine event's detail holds a whole report; its first line names the reason.
        constexpr std::size_t kMaxDetail = 160;
        std::string detail = e.detail.substr(0, e.detail.find('\n'));
        if (detail.size() > kMaxDetail) detail = detail.substr(0, kMaxDetail) + "...";
        if (detail.size() < e.detail.size()) detail += " [...]";
        out += " '" + detail + "'";
    }
    return out;
}

std::string describe(const EventSummary& s) {
    std::string out = num(s.total) + " in total; highest generation " + num(s.max_generation);
    if (s.top) out += " (" + describe(*s.top) + ")";
    out += "; latest claim " + (s.latest_claim ? describe(*s.latest_claim) : std::string("none"));
    if (s.resolution) out += "; operator resolution " + describe(*s.resolution);
    out += "; completions " + num(s.completions);
    if (s.completions > 0) {
        out += " at generations " + join(s.completion_generations) + ", latest " +
               describe(*s.latest_completion);
    }
    return out + "; organizations " + join(s.orgs);
}

}  // namespace aclaim::ops
