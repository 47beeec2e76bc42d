#pragma once

// How a worker spaces its reconnections after losing its coordinator, so that a fleet of
// thousands does not come back at once (docs/protocol.md, "Reconnecting a fleet"). One rule for
// the C++ worker library, the bench's idle workers (which stand for library users) and, mirrored
// constant for constant, the Python client (clients/python/aclaim/_link.py). Pure arithmetic over
// a caller's random engine, so it is tested without sockets, clocks or sleeps.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <random>

#include "common/base/backoff.hpp"

namespace aclaim::base {

struct ReconnectSpread {
    using Millis = std::chrono::milliseconds;

    /// The first reconnection after a loss waits a uniformly random share of a window of this much
    /// per session the coordinator last reported (WELCOME's `sessions`): a fleet then arrives at
    /// 500 handshakes a second at most, which a coordinator on two cores serves as they come
    /// (docs/performance.md measured 250–450 a second while a storm wasted most of its work on
    /// handshakes that timed out and were redone).
    static constexpr Millis kPerSession{2};
    /// The window's bounds: no fleet waits less than the first back-off (100 ms by default), and
    /// none more than a minute, whatever it is told.
    static constexpr Millis kMinWindow{100};
    static constexpr Millis kMaxWindow{60000};
    /// The most of a coordinator's retry_after_ms a worker honours, and the most it adds to it.
    static constexpr Millis kMaxRetryAfter{60000};
    static constexpr Millis kRetryJitter{100};

    /// The window for a coordinator that reported `sessions` (absent: an older coordinator, or
    /// none heard from yet: the smallest window), at least `least` (the worker's first back-off).
    static Millis window(std::optional<std::int64_t> sessions, Millis least = kMinWindow) {
        least = std::clamp(least, Millis(0), kMaxWindow);
        if (!sessions || *sessions <= 0) return least;
        const auto capped = std::min<std::int64_t>(*sessions, kMaxWindow / kPerSession);
        return std::clamp(kPerSession * capped, least, kMaxWindow);
    }

    /// The wait before the next attempt, taking it from `backoff` (reset at every WELCOME):
    /// - the first attempt after a session (backoff.attempts() == 0): uniform in [0, first_window];
    /// - every later one: uniform in [d/2, d], d the back-off's doubling delay;
    /// - with a coordinator's `retry_after` r: never less than it, r plus up to kRetryJitter when
    ///   that is later, and on the first attempt instead of the worker's own share. The
    ///   coordinator spreads the r it gives (each worker it turns away gets a draw of its own),
    ///   so the worker only blurs it.
    template <class Rng>
    static Millis next_wait(Backoff& backoff, Millis first_window,
                            std::optional<Millis> retry_after, Rng& rng) {
        const bool first = backoff.attempts() == 0;
        const Millis nominal = backoff.next();
        const bool told = retry_after && *retry_after > Millis(0);
        Millis wait{0};
        if (first && !told) {
            std::uniform_int_distribution<Millis::rep> share(
                0, std::max<Millis::rep>(first_window.count(), 0));
            wait = Millis(share(rng));
        } else if (!first) {
            std::uniform_int_distribution<Millis::rep> spread(nominal.count() / 2, nominal.count());
            wait = Millis(spread(rng));
        }
        if (told) {
            // A first attempt takes the coordinator's draw instead of its own (the coordinator
            // drew it from the fleet it has now): the later of two draws would crowd the
            // window's end.
            const auto r = std::min(*retry_after, kMaxRetryAfter).count();
            std::uniform_int_distribution<Millis::rep> after(r, r + kRetryJitter.count());
            wait = std::max(wait, Millis(after(rng)));
        }
        return wait;
    }
};

}  // namespace aclaim::base
