#include "tests/support/eventually.hpp"

#include <thread>

#include "common/base/clock.hpp"

namespace aclaim::testing {

bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds limit) {
    const auto until = base::SystemClock().monotonic_now() + limit;
    while (true) {
        if (condition()) return true;
        if (base::SystemClock().monotonic_now() >= until) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
}

}  // namespace aclaim::testing
