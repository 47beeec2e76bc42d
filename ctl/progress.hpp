#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "common/base/clock.hpp"

namespace aclaim::ctl {

/// A progress bar on standard error, redrawn in place, for a person at a terminal:
///   enqueue [###########---------]  55%  550000/1000000  41.2k/s  eta 11s
/// Disabled, it prints nothing, so that scripts and logs see only the final summary line.
class ProgressBar {
  public:
    ProgressBar(const base::Clock& clock, std::string label, std::int64_t total, bool enabled);
    ~ProgressBar();
    ProgressBar(const ProgressBar&) = delete;
    ProgressBar& operator=(const ProgressBar&) = delete;

    /// Records `done` items; redraws at most ten times a second.
    void update(std::int64_t done);
    /// Draws the final state and ends the line. Called by the destructor if not before.
    void finish();

    /// The bar's text for `done` items after `elapsed`, without terminal control characters.
    static std::string render(const std::string& label, std::int64_t done, std::int64_t total,
                              std::chrono::steady_clock::duration elapsed);

  private:
    void draw();

    const base::Clock& clock_;
    std::string label_;
    std::int64_t total_;
    std::int64_t done_ = 0;
    bool enabled_;
    bool finished_ = false;
    base::MonotonicTime started_;
    base::MonotonicTime drawn_{};
};

}  // namespace aclaim::ctl
