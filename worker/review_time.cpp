#include "worker/review_time.hpp"

#include <cmath>

namespace aclaim::worker {

namespace {
constexpr double kLognormalSigma = 0.5;
}

std::optional<ReviewDist> parse_review_dist(std::string_view name) {
    if (name == "fixed") return ReviewDist::Fixed;
    if (name == "uniform") return ReviewDist::Uniform;
    if (name == "lognormal") return ReviewDist::Lognormal;
    return std::nullopt;
}

ReviewTime::ReviewTime(ReviewDist dist, Millis mean, std::uint64_t seed)
    : dist_(dist), mean_(mean), rng_(seed) {}

Millis ReviewTime::sample() {
    const double mean = static_cast<double>(mean_.count());
    if (mean <= 0) return Millis(0);
    double ms = mean;
    switch (dist_) {
        case ReviewDist::Fixed:
            break;
        case ReviewDist::Uniform:
            ms = std::uniform_real_distribution<double>(0, 2 * mean)(rng_);
            break;
        case ReviewDist::Lognormal: {
            // E[X] = exp(mu + sigma^2/2), so this mu keeps the mean where it was asked to be.
            const double mu = std::log(mean) - kLognormalSigma * kLognormalSigma / 2;
            ms = std::lognormal_distribution<double>(mu, kLognormalSigma)(rng_);
            break;
        }
    }
    return Millis(static_cast<Millis::rep>(std::llround(ms)));
}

}  // namespace aclaim::worker
