#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/assignment.hpp"
#include "coordinator/errors.hpp"

namespace aclaim::coordinator {

/// Counters of everything the coordinator answered or did. Written by the router thread and the
/// reaper, read by anyone (the summary at exit now, an HTTP exporter later).
struct Metrics {
    using Counter = std::atomic<std::uint64_t>;
    static constexpr std::size_t kRejectionKinds = 7;

    Counter claims{0};             ///< CLAIMs answered with ASSIGNED
    Counter jobs_assigned{0};      ///< jobs handed out in those ASSIGNED replies
    Counter no_work{0};            ///< CLAIMs answered with NO_WORK
    Counter parked{0};             ///< times a CLAIM was parked to wait for work
    Counter renewals{0};           ///< RENEWs answered with LEASE
    Counter completions{0};        ///< COMPLETEs accepted (replays included)
    Counter failures{0};           ///< FAILs accepted
    Counter releases{0};           ///< RELEASEs accepted, and assignments released undelivered
    Counter replayed{0};           ///< accepted transitions that had already been committed
    Counter reclaims{0};           ///< leases the reaper took back
    Counter revocations{0};        ///< REVOKED sent (renewal refused or reclaim pushed)
    Counter replies_dropped{0};    ///< replies whose peer was gone or not reading
    Counter requests{0};           ///< frames received on the ROUTER
    std::atomic<std::int64_t> connected_sessions{0};  ///< sessions currently open
    std::array<Counter, kRejectionKinds> rejections{};  ///< REJECTED/REVOKED, by Rejection
    std::array<Counter, errors::kCounted.size()> errors{};  ///< ERRORs by code

    void count_rejection(common::Rejection r);
    void count_error(std::string_view code);
    std::uint64_t rejections_of(common::Rejection r) const;
    std::uint64_t errors_of(std::string_view code) const;

    /// One line with every non-zero counter, for the log at exit.
    std::string summary() const;
};

}  // namespace aclaim::coordinator
