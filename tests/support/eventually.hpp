#pragma once

#include <chrono>
#include <functional>

namespace aclaim::testing {

/// Polls `condition` every 5 ms until it holds or `limit` passes; for an observable state that has
/// no message to wait on (a row changed, a process exited), never as a timed guess.
bool eventually(const std::function<bool()>& condition,
                std::chrono::milliseconds limit = std::chrono::seconds(5));

}  // namespace aclaim::testing
