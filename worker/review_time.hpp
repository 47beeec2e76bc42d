#pragma once

#include <optional>
#include <random>
#include <string_view>

#include "worker/held_jobs.hpp"

namespace aclaim::worker {

enum class ReviewDist { Fixed, Uniform, Lognormal };

std::optional<ReviewDist> parse_review_dist(std::string_view name);

/// How long a simulated review takes. Every distribution has the requested mean: uniform spans
/// [0, 2*mean], lognormal has sigma 0.5 (a long right tail, like real reviews).
class ReviewTime {
  public:
    ReviewTime(ReviewDist dist, Millis mean, std::uint64_t seed);
    Millis sample();

  private:
    ReviewDist dist_;
    Millis mean_;
    std::mt19937_64 rng_;
};

}  // namespace aclaim::worker
