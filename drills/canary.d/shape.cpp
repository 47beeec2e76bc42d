#include "drills/canary.d/shape.hpp"

#include <algorithm>
#include <cmath>

#include "common/base/enum_names.hpp"

namespace aclaim::drills {

constexpr base::EnumNames<Shape, 4> kShapeNames{{"constant", "ramp", "step", "spike"}};
static_assert(kShapeNames.covers(Shape::Spike));

std::string_view to_string(Shape shape) {
    return kShapeNames(shape);
}

std::optional<Shape> parse_shape(std::string_view name) {
    return kShapeNames.parse(name);
}

int pollers_at(const LoadShape& load, int second) {
    const int max = load.max_pollers;
    const int seconds = load.seconds;
    const int start = std::min(load.start_pollers, max);
    second = std::clamp(second, 0, std::max(seconds - 1, 0));
    switch (load.shape) {
        case Shape::Constant:
            return max;
        case Shape::Ramp: {
            if (seconds <= 1) return max;
            const double f = static_cast<double>(second) / (seconds - 1);
            return start + static_cast<int>(std::lround((max - start) * f));
        }
        case Shape::Step: {
            // Doublings from start until max is reached, each held for the same share of the run.
            int steps = 1;
            for (int level = start; level < max; level *= 2) ++steps;
            const int step = std::min(steps - 1, second * steps / std::max(seconds, 1));
            int level = start;
            for (int i = 0; i < step; ++i) level *= 2;
            return std::min(level, max);
        }
        case Shape::Spike: {
            // The burst lands after the fleet has settled and leaves time to watch it recover.
            const int from = seconds * 2 / 5;
            const int to = std::max(from + 1, seconds * 3 / 5);
            return second >= from && second < to ? max : start;
        }
    }
    return start;
}

}  // namespace aclaim::drills
