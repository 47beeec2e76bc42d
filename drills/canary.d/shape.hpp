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

/// A run's load: its shape and the numbers the shape is drawn between, named so that no two of
/// them can be passed in each other's place.
struct LoadShape {
    Shape shape = Shape::Constant;
    int start_pollers = 1;
    int max_pollers = 1;
    int seconds = 1;
};

/// The poller count the shape asks for in interval `second` (0 .. seconds-1), before any back-off.
int pollers_at(const LoadShape& load, int second);

}  // namespace aclaim::drills
