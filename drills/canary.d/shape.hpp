#pragma once

// Load shapes: how many synthetic pollers run in each one-second interval of a canary.

#include <optional>
#include <string_view>

namespace aclaim::drills {

enum class Shape {
    Constant,  ///< max pollers for the whole run
    Ramp,      ///< start pollers rising linearly to max pollers in the last interval
    Step,      ///< start pollers doubling in equal steps until max pollers
    Spike,     ///< start pollers, max pollers for the middle fifth of the run, start again
};

std::string_view to_string(Shape shape);
std::optional<Shape> parse_shape(std::string_view name);

/// The poller count the shape asks for in interval `second` (0 .. seconds-1), before any back-off.
int pollers_at(Shape shape, int start, int max, int seconds, int second);

}  // namespace aclaim::drills
