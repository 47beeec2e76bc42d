#pragma once

// What the decoder's parts share: its two failures, the JSON body reader (json_decode.cpp) and the
// UTF-8 helpers (text.cpp). Internal to aclaim_proto; everything else uses protocol.hpp.

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace aclaim::proto::detail {

/// A body that cannot be read; becomes "undecodable".
struct Unreadable : std::runtime_error {
    using std::runtime_error::runtime_error;
};
/// A body that was read but holds a value out of range; becomes "invalid".
struct OutOfRange : std::runtime_error {
    using std::runtime_error::runtime_error;
};

/// "ff" for the byte 0xff.
std::string byte_hex(char c);

/// A surrogate code point as a peer would have escaped it, e.g. "\\udddd".
std::string surrogate_escape(unsigned code_point);

/// Why a decoded string is not UTF-8, or empty when it is.
std::string utf8_problem(std::string_view s);

/// A JSON body read into the message T, for every message type: throws Unreadable, naming the
/// field, for anything that is not exactly T's members with values of their types.
template <class T>
T read_json(std::string_view body);

/// The top-level "req" of a JSON body, read as far as the body parses; 0 if it cannot be found.
std::uint64_t json_req(std::string_view body) noexcept;

}  // namespace aclaim::proto::detail
