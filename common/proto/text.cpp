#include <algorithm>
#include <array>
#include <charconv>
#include <optional>
#include <vector>

#include "common/proto/decode_detail.hpp"
#include "common/proto/protocol.hpp"

namespace aclaim::proto {

namespace {

using detail::byte_hex;

/// One UTF-8 character as found in a string: its length, and its code point.
struct Utf8Char {
    std::size_t length = 0;
    unsigned code_point = 0;
};

/// The character starting at s[i], or nothing if the bytes there are not one: RFC 3629 only
/// allows the shortest form and at most U+10FFFF. Surrogates are returned, for the caller to
/// judge, because JSON escapes can produce them.
std::optional<Utf8Char> utf8_char_at(std::string_view s, std::size_t i) {
    const auto lead = static_cast<unsigned char>(s[i]);
    if (lead < 0x80) return Utf8Char{1, lead};
    std::size_t length = 0;
    unsigned code_point = 0;
    unsigned shortest = 0;
    if ((lead & 0xe0) == 0xc0) {
        length = 2;
        code_point = lead & 0x1fu;
        shortest = 0x80;
    } else if ((lead & 0xf0) == 0xe0) {
        length = 3;
        code_point = lead & 0x0fu;
        shortest = 0x800;
    } else if ((lead & 0xf8) == 0xf0) {
        length = 4;
        code_point = lead & 0x07u;
        shortest = 0x10000;
    }
    if (length == 0 || s.size() - i < length) return std::nullopt;
    for (std::size_t k = 1; k < length; ++k) {
        const auto next = static_cast<unsigned char>(s[i + k]);
        if ((next & 0xc0) != 0x80) return std::nullopt;
        code_point = (code_point << 6) | (next & 0x3fu);
    }
    if (code_point < shortest || code_point > 0x10ffff) return std::nullopt;
    return Utf8Char{length, code_point};
}

bool is_surrogate(unsigned code_point) {
    return code_point >= 0xd800 && code_point <= 0xdfff;
}

/// Copies `in` as valid UTF-8 of at most max_bytes: what is not a character becomes \xHH, and
/// so do control characters when escape_controls is set. A cut text ends in `ellipsis`.
std::string sanitize(std::string_view in, std::size_t max_bytes, bool escape_controls,
                     std::string_view ellipsis) {
    std::string out;
    out.reserve(std::min(in.size(), max_bytes));
    std::vector<std::size_t> ends;  // where each piece ends in `out`
    std::size_t i = 0;
    while (i < in.size()) {
        const auto c = utf8_char_at(in, i);
        std::string piece;
        std::size_t used = 1;
        if (!c || is_surrogate(c->code_point) ||
            (escape_controls && (c->code_point < 0x20 || c->code_point == 0x7f))) {
            piece = "\\x" + byte_hex(in[i]);
        } else {
            piece = std::string(in.substr(i, c->length));
            used = c->length;
        }
        if (out.size() + piece.size() > max_bytes) {
            // Whole characters and escapes only: drop back to the end of one.
            const auto keep = max_bytes > ellipsis.size() ? max_bytes - ellipsis.size() : 0;
            while (!ends.empty() && ends.back() > keep) ends.pop_back();
            out.resize(ends.empty() ? 0 : ends.back());
            if (ellipsis.size() <= max_bytes) out += ellipsis;
            return out;
        }
        out += piece;
        ends.push_back(out.size());
        i += used;
    }
    return out;
}

}  // namespace

namespace detail {

std::string byte_hex(char c) {
    static constexpr char kDigits[] = "0123456789abcdef";
    const auto b = static_cast<unsigned char>(c);
    return {kDigits[b >> 4], kDigits[b & 0xf]};
}

/// A surrogate code point as a peer would have escaped it, e.g. "\udddd".
std::string surrogate_escape(unsigned code_point) {
    std::array<char, 8> digits{};
    const auto end =
        std::to_chars(digits.data(), digits.data() + digits.size(), code_point, 16).ptr;
    return "\\u" + std::string(digits.data(), end);
}

/// Why a decoded string is not UTF-8 (RFC 3629: shortest form, no surrogates, at most U+10FFFF),
/// or empty when it is. rapidjson validates the raw bytes, but writes a lone \uDC00..\uDFFF escape
/// out as the three bytes of a surrogate, which no UTF-8 reader accepts: not even our own decoder
/// once the encoder has written those bytes back raw.
std::string utf8_problem(std::string_view s) {
    std::size_t i = 0;
    while (i < s.size()) {
        const auto c = utf8_char_at(s, i);
        if (!c) return "invalid UTF-8 at byte " + std::to_string(i) + " of the string";
        if (is_surrogate(c->code_point))
            return "an unpaired UTF-16 surrogate escape (" + surrogate_escape(c->code_point) + ")";
        i += c->length;
    }
    return {};
}

}  // namespace detail

std::string quote_peer_bytes(std::string_view bytes, std::size_t max_bytes) {
    return sanitize(bytes, max_bytes, true, "...");
}

std::string valid_utf8_text(std::string_view text, std::size_t max_bytes) {
    return sanitize(text, max_bytes, false, "");
}

}  // namespace aclaim::proto
