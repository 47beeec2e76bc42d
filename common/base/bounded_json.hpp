#pragma once

// JSON from outside the process (an operator's files, an HTTP body) parsed with a bound on its
// nesting. nlohmann's parser itself keeps its nesting on the heap, but what is done with a value
// afterwards (dump(), a comparison, a copy) recurses once per level: a line of 100,000 '[' ends
// the process on its stack. Every input that nobody here wrote goes through this parse, so a
// value that reaches the rest of the program is at most kMaxInputJsonDepth deep.
//
// Header-only: each caller links nlohmann_json itself; aclaim_base keeps it private.

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace aclaim::base {

/// The deepest nesting of objects and arrays accepted in JSON input (docs/security.md): far
/// beyond any document aclaim reads or any payload a person writes, far below what recursion on
/// the default stack survives.
inline constexpr int kMaxInputJsonDepth = 128;

/// Parses `text` as nlohmann::json::parse does, and throws nlohmann::json::parse_error (id 101,
/// "nested deeper than 128 levels") as soon as an object or array opens deeper than `max_depth`,
/// before anything deeper is built.
inline nlohmann::json parse_bounded_json(std::string_view text,
                                         int max_depth = kMaxInputJsonDepth) {
    using nlohmann::json;
    const json::parser_callback_t bound = [max_depth](int depth, json::parse_event_t event, json&) {
        // `depth` is that of the value opening: the top level's object is depth 0.
        if ((event == json::parse_event_t::object_start ||
             event == json::parse_event_t::array_start) &&
            depth >= max_depth) {
            throw json::parse_error::create(
                101, 0, "nested deeper than " + std::to_string(max_depth) + " levels", nullptr);
        }
        return true;
    };
    return json::parse(text.begin(), text.end(), bound);
}

/// The same without exceptions for bad input: a discarded value (is_discarded()) for text that
/// is not JSON or is nested too deep, as json::parse(text, nullptr, false) answers.
inline nlohmann::json parse_bounded_json_or_discarded(std::string_view text,
                                                      int max_depth = kMaxInputJsonDepth) {
    try {
        return parse_bounded_json(text, max_depth);
    } catch (const nlohmann::json::parse_error&) {
        return nlohmann::json(nlohmann::json::value_t::discarded);
    }
}

}  // namespace aclaim::base
