#pragma once

// Shared by the libFuzzer targets: how a fuzzer input becomes the frames a coordinator or a worker
// would hand to proto::decode, and the property every successful decode must keep.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "common/proto/protocol.hpp"

namespace aclaim::fuzz {

namespace proto = aclaim::proto;

/// Most frames a message is split into; decode must refuse every count but three.
inline constexpr std::size_t kMaxFrames = 5;

/// Splits raw bytes into frames: the first byte is the frame count (mod kMaxFrames + 1), then each
/// frame but the last is a two-byte little-endian length (clamped to what remains) and its bytes;
/// the last frame takes the rest. Every byte string is a valid input.
inline std::vector<std::string_view> split_frames(const std::uint8_t* data, std::size_t size) {
    std::vector<std::string_view> frames;
    if (size == 0) return frames;
    const std::size_t count = data[0] % (kMaxFrames + 1);
    std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
    for (std::size_t i = 0; i < count; ++i) {
        if (i + 1 == count) {
            frames.push_back(rest);
            break;
        }
        std::size_t len = 0;
        if (rest.size() >= 2) {
            len = static_cast<std::uint8_t>(rest[0]) | (static_cast<std::uint8_t>(rest[1]) << 8);
            rest.remove_prefix(2);
        } else {
            rest = {};
        }
        len = std::min(len, rest.size());
        frames.push_back(rest.substr(0, len));
        rest.remove_prefix(len);
    }
    return frames;
}

/// The inverse of split_frames for the seed corpus: frames as a fuzzer input.
inline std::string join_frames(const std::vector<std::string>& frames) {
    std::string out(1, static_cast<char>(frames.size()));
    for (std::size_t i = 0; i < frames.size(); ++i) {
        if (i + 1 < frames.size()) {
            out.push_back(static_cast<char>(frames[i].size() & 0xff));
            out.push_back(static_cast<char>((frames[i].size() >> 8) & 0xff));
        }
        out += frames[i];
    }
    return out;
}

/// A default message of the alternative at `index` (mod the number of types): its type name is
/// what the per-encoding targets put in the type frame.
template <std::size_t I = 0>
proto::Message message_at(std::size_t index) {
    if constexpr (I + 1 < std::variant_size_v<proto::Message>) {
        if (index % std::variant_size_v<proto::Message> != I) return message_at<I + 1>(index);
    }
    return proto::Message(std::in_place_index<I>);
}

[[noreturn]] inline void finding(const char* what) {
    std::fprintf(stderr, "fuzz finding: %s\n", what);
    std::abort();
}

/// Decodes, and checks what must hold of any result: an error has a documented code and a text
/// within the protocol's limit; a message re-encodes to frames that decode to the same message.
inline void decode_and_check(const std::vector<std::string_view>& frames) {
    auto result = proto::decode(frames);
    if (const auto* err = std::get_if<proto::DecodeError>(&result)) {
        static constexpr std::string_view kCodes[] = {
            "malformed", "oversized", "wrong_version", "unknown_type", "undecodable", "invalid"};
        bool known = false;
        for (const auto code : kCodes) known = known || err->code == code;
        if (!known) finding("decode error with an undocumented code");
        if (err->text.empty()) finding("decode error without a text");
        if (err->text.size() > proto::kMaxTextBytes) finding("decode error text too long");
        if (proto::valid_utf8_text(err->text, err->text.size()) != err->text)
            finding("decode error text is not UTF-8");
        return;
    }
    const auto& decoded = std::get<proto::Decoded>(result);
    const proto::Frames again = proto::encode(decoded.message, decoded.encoding);
    auto second = proto::decode({again.tag, again.type, again.body});
    const auto* redecoded = std::get_if<proto::Decoded>(&second);
    if (redecoded == nullptr) finding("a decoded message does not decode after re-encoding");
    if (!(redecoded->message == decoded.message)) finding("re-encoding changed the message");
    if (redecoded->encoding != decoded.encoding) finding("re-encoding changed the encoding");
}

/// One tag, the type chosen by the first byte, the body from the rest: keeps the fuzzer inside
/// one encoding's body decoder instead of spending its time finding a valid tag and type.
inline void fuzz_body(std::string_view tag, const std::uint8_t* data, std::size_t size) {
    if (size == 0) return;
    const auto type = proto::type_name(message_at(data[0]));
    const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
    decode_and_check({tag, type, body});
}

}  // namespace aclaim::fuzz
