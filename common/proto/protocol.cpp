// clang-format off
// cereal's JSON archive must come before anything else pulls in rapidjson: it redefines
// RAPIDJSON_ASSERT to throw, and a rapidjson assert that aborts would let a peer kill us.
#include <cereal/archives/json.hpp>
#include <cereal/archives/portable_binary.hpp>
#include <cereal/types/string.hpp>
#include <cereal/types/vector.hpp>
#include <rapidjson/document.h>
#include <rapidjson/encodedstream.h>
#include <rapidjson/error/en.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>
// clang-format on

#include "common/proto/protocol.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <concepts>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "common/proto/protocol_serialize.hpp"
#include "common/proto/wire_errors.hpp"

namespace aclaim::common::proto {

namespace {

/// Type frame names, in the order of the Message alternatives.
constexpr std::array<std::string_view, std::variant_size_v<Message>> kTypeNames = {
    "HELLO",    "CLAIM",   "RENEW", "COMPLETE", "FAIL",     "RELEASE",  "BYE",  "WELCOME",
    "ASSIGNED", "NO_WORK", "LEASE", "REVOKED",  "ACCEPTED", "REJECTED", "ERROR"};
/// HELLO .. BYE come first in Message.
constexpr std::size_t kRequestTypes = 7;
/// Our deepest body is object -> jobs array -> object; anything deeper is hostile.
constexpr int kMaxJsonDepth = 4;
/// Most bytes of a peer's member name quoted in an error text, which must stay within
/// kMaxTextBytes.
constexpr std::size_t kMaxQuotedNameBytes = 64;

/// A body that cannot be read; becomes "undecodable".
struct Unreadable : std::runtime_error {
    using std::runtime_error::runtime_error;
};
/// A body that was read but holds a value out of range; becomes "invalid".
struct OutOfRange : std::runtime_error {
    using std::runtime_error::runtime_error;
};

/// Reads cereal portable binary without trusting it: every length prefix is checked against the
/// bytes that remain before anything is allocated, so a 2^60 prefix costs nothing.
class BoundedBinaryReader {
  public:
    explicit BoundedBinaryReader(std::string_view in) : in_(in) {
        const auto flag = take(1)[0];
        if (flag != 0 && flag != 1) throw Unreadable("endianness byte must be 0 or 1");
        little_endian_ = flag == 1;
    }

    template <class... T>
    void operator()(cereal::NameValuePair<T>&&... fields) {
        (read(fields.value), ...);
    }

    void expect_end() const {
        if (!in_.empty())
            throw Unreadable(std::to_string(in_.size()) + " trailing bytes after the body");
    }

  private:
    std::string_view take(std::size_t n) {
        if (n > in_.size())
            throw Unreadable("truncated: needs " + std::to_string(n) + " more bytes, " +
                             std::to_string(in_.size()) + " left");
        const auto out = in_.substr(0, n);
        in_.remove_prefix(n);
        return out;
    }

    template <std::integral I>
    void read(I& value) {
        using U = std::make_unsigned_t<I>;
        const auto bytes = take(sizeof(I));
        U u = 0;
        for (std::size_t i = 0; i < sizeof(I); ++i) {
            const auto b = static_cast<U>(static_cast<unsigned char>(bytes[i]));
            u |= static_cast<U>(b << (8 * (little_endian_ ? i : sizeof(I) - 1 - i)));
        }
        value = static_cast<I>(u);
    }

    void read(bool& value) {
        const auto b = take(1)[0];
        if (b != 0 && b != 1) throw Unreadable("bool byte must be 0 or 1");
        value = b == 1;
    }

    std::uint64_t read_size() {
        std::uint64_t n = 0;
        read(n);
        if (n > in_.size())
            throw Unreadable("length prefix " + std::to_string(n) + " exceeds the " +
                             std::to_string(in_.size()) + " bytes left");
        return n;
    }

    void read(std::string& value) { value = std::string(take(read_size())); }

    void read(AssignedJob& value) { value.serialize(*this); }

    void read(std::vector<AssignedJob>& value) {
        // Elements are appended as they are read, so memory follows the bytes actually present.
        const auto n = read_size();
        value.clear();
        for (std::uint64_t i = 0; i < n; ++i) read(value.emplace_back());
    }

    std::string_view in_;
    bool little_endian_ = true;
};

/// Counts a struct's fields: JSON bodies must hold exactly these members, no more.
struct FieldCounter {
    std::size_t count = 0;
    template <class... T>
    void operator()(T&&...) {
        count += sizeof...(T);
    }
};

template <class T>
std::size_t field_count() {
    FieldCounter counter;
    T{}.serialize(counter);
    return counter.count;
}

/// Rejects raw NUL bytes (rapidjson would stop there and ignore the rest) and nesting deeper than
/// any body needs, before a recursive parser sees the text.
void check_json_shape(std::string_view body) {
    int depth = 0;
    bool in_string = false;
    bool escaped = false;
    for (const char c : body) {
        if (c == '\0') throw Unreadable("NUL byte in JSON body");
        if (in_string) {
            if (escaped)
                escaped = false;
            else if (c == '\\')
                escaped = true;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '{' || c == '[') {
            if (++depth > kMaxJsonDepth) throw Unreadable("JSON nested too deeply");
        } else if (c == '}' || c == ']') {
            --depth;
        }
    }
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
        const auto lead = static_cast<unsigned char>(s[i]);
        if (lead < 0x80) {
            ++i;
            continue;
        }
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
        const auto invalid = [i] {
            return "invalid UTF-8 at byte " + std::to_string(i) + " of the string";
        };
        if (length == 0 || s.size() - i < length) return invalid();
        for (std::size_t k = 1; k < length; ++k) {
            const auto next = static_cast<unsigned char>(s[i + k]);
            if ((next & 0xc0) != 0x80) return invalid();
            code_point = (code_point << 6) | (next & 0x3fu);
        }
        if (code_point < shortest || code_point > 0x10ffff) return invalid();
        if (code_point >= 0xd800 && code_point <= 0xdfff)
            return "an unpaired UTF-16 surrogate escape (" + surrogate_escape(code_point) + ")";
        i += length;
    }
    return {};
}

/// Refuses, naming the member it belongs to, any string in a JSON body that is not UTF-8. cereal
/// copies strings without looking at them, so a string that slipped through would decode into a
/// message whose own JSON encoding no longer decodes. rapidjson's reader does the parsing; this
/// handler only tracks where it is, so a refusal can say which field is wrong.
class JsonStringChecker
    : public rapidjson::BaseReaderHandler<rapidjson::UTF8<>, JsonStringChecker> {
  public:
    explicit JsonStringChecker(std::string_view body) : body_(body) {}

    /// Throws Unreadable for a bad string; any other syntax error is left to the parse that
    /// builds the document, which reports it.
    void run() {
        rapidjson::MemoryStream bytes(body_.data(), body_.size());
        rapidjson::EncodedInputStream<rapidjson::UTF8<>, rapidjson::MemoryStream> in(bytes);
        rapidjson::Reader reader;
        const auto result = reader.Parse<rapidjson::kParseValidateEncodingFlag>(in, *this);
        if (!problem_.empty()) throw Unreadable(problem_);
        // rapidjson refuses these itself before a string is complete, with its offset.
        if (result.Code() == rapidjson::kParseErrorStringUnicodeSurrogateInvalid)
            throw Unreadable(place() + " holds an unpaired UTF-16 surrogate escape" +
                             escape_at(result.Offset()));
        if (result.Code() == rapidjson::kParseErrorStringInvalidEncoding &&
            result.Offset() < body_.size())
            throw Unreadable(place() + " holds invalid UTF-8 (byte 0x" +
                             byte_hex(body_[result.Offset()]) + " at offset " +
                             std::to_string(result.Offset()) + ")");
    }

    // rapidjson's SAX events; returning false stops the reader with problem_ set.
    bool Default() {
        value_done();
        return true;
    }
    bool String(const char* s, rapidjson::SizeType length, bool) {
        if (!check(std::string_view(s, length))) return false;
        value_done();
        return true;
    }
    bool Key(const char* s, rapidjson::SizeType length, bool) {
        if (!check(std::string_view(s, length))) return false;
        levels_.back().key = quotable(std::string_view(s, length));
        levels_.back().expecting_key = false;
        return true;
    }
    bool StartObject() {
        levels_.emplace_back().object = true;
        return true;
    }
    bool EndObject(rapidjson::SizeType) {
        levels_.pop_back();
        return Default();
    }
    bool StartArray() {
        levels_.emplace_back().object = false;
        return true;
    }
    bool EndArray(rapidjson::SizeType) {
        levels_.pop_back();
        return Default();
    }

  private:
    struct Level {
        bool object = false;
        bool expecting_key = true;  ///< objects: the next string is a member name
        std::string key;            ///< objects: the member whose value comes next
        std::size_t index = 0;      ///< arrays: the element that comes next
    };

    bool check(std::string_view s) {
        const auto problem = utf8_problem(s);
        if (!problem.empty()) problem_ = place() + " holds " + problem;
        return problem.empty();
    }

    void value_done() {
        if (levels_.empty()) return;
        if (levels_.back().object)
            levels_.back().expecting_key = true;
        else
            ++levels_.back().index;
    }

    /// The string the reader is in, for a person: "field 'jobs[0].payload'" or "a member name".
    std::string place() const {
        std::string path;
        bool named = false;  // a member named "" still names a field
        for (const auto& level : levels_) {
            if (!level.object) {
                path += "[" + std::to_string(level.index) + "]";
            } else if (!level.expecting_key) {
                path += (path.empty() && !named ? "" : ".") + level.key;
                named = true;
            }
        }
        if (!levels_.empty() && levels_.back().object && levels_.back().expecting_key)
            return path.empty() ? "a member name" : "a member name in '" + path + "'";
        return path.empty() && !named ? "the top-level string" : "field '" + path + "'";
    }

    /// A peer's member name, cut short and without control characters, for an error text.
    static std::string quotable(std::string_view name) {
        std::size_t n = std::min(name.size(), kMaxQuotedNameBytes);
        // Cut at a character boundary so the error text itself stays UTF-8.
        while (n < name.size() && n > 0 && (static_cast<unsigned char>(name[n]) & 0xc0) == 0x80)
            --n;
        std::string out(name.substr(0, n));
        std::replace_if(
            out.begin(), out.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; },
            '?');
        return out;
    }

    /// " (\ud800)" for the escape rapidjson reported at `offset`, or nothing if it is not one.
    std::string escape_at(std::size_t offset) const {
        if (offset + 6 > body_.size() || body_.substr(offset, 2) != "\\u") return {};
        unsigned code_point = 0;
        const auto digits = body_.substr(offset + 2, 4);
        const auto [end, error] =
            std::from_chars(digits.data(), digits.data() + digits.size(), code_point, 16);
        if (error != std::errc{} || end != digits.data() + digits.size()) return {};
        return " (" + surrogate_escape(code_point) + ")";
    }

    static std::string byte_hex(char c) {
        static constexpr char kDigits[] = "0123456789abcdef";
        const auto b = static_cast<unsigned char>(c);
        return {kDigits[b >> 4], kDigits[b & 0xf]};
    }

    std::string_view body_;
    std::vector<Level> levels_;
    std::string problem_;
};

/// cereal finds members by name but ignores extra ones, and its string loader stops at an
/// escaped NUL; both would let two readers of one body disagree, so refuse them.
void check_members(const rapidjson::Value& object, std::size_t expected) {
    if (!object.IsObject()) throw Unreadable("JSON body must be an object");
    if (object.MemberCount() != expected)
        throw Unreadable("JSON object has " + std::to_string(object.MemberCount()) +
                         " members, expected exactly " + std::to_string(expected));
    for (auto it = object.MemberBegin(); it != object.MemberEnd(); ++it) {
        const auto& v = it->value;
        if (v.IsString() && std::strlen(v.GetString()) != v.GetStringLength())
            throw Unreadable(std::string("NUL character in member ") + it->name.GetString());
    }
}

template <class T>
T read_json(std::string_view body) {
    check_json_shape(body);
    JsonStringChecker(body).run();
    rapidjson::Document doc;
    doc.Parse<rapidjson::kParseValidateEncodingFlag>(body.data(), body.size());
    if (doc.HasParseError())
        throw Unreadable(std::string("JSON parse error at offset ") +
                         std::to_string(doc.GetErrorOffset()) + ": " +
                         rapidjson::GetParseError_En(doc.GetParseError()));
    check_members(doc, field_count<T>());
    T msg;
    {
        std::istringstream in{std::string(body)};
        cereal::JSONInputArchive ar(in);
        msg.serialize(ar);
    }
    if constexpr (std::is_same_v<T, Assigned>) {
        for (const auto& job : doc["jobs"].GetArray())
            check_members(job, field_count<AssignedJob>());
    }
    return msg;
}

template <class T>
T read_binary(std::string_view body) {
    BoundedBinaryReader reader(body);
    T msg;
    msg.serialize(reader);
    reader.expect_end();
    return msg;
}

// ---- field ranges ----

void require(bool ok, const char* what) {
    if (!ok) throw OutOfRange(what);
}
/// Any message or job that names a job by id and generation.
template <class M>
void check_id(const M& m) {
    require(m.job_id >= 0, "job_id must not be negative");
    require(m.generation >= 0, "generation must not be negative");
}
void check_text(const std::string& s, const char* what) {
    require(s.size() <= kMaxTextBytes, what);
}

void validate(const Hello& m) {
    require(!m.worker_id.empty() && m.worker_id.size() <= kMaxWorkerIdBytes,
            "worker_id must be 1..128 bytes");
    require(std::all_of(m.worker_id.begin(), m.worker_id.end(),
                        [](char c) { return c >= 0x20 && c <= 0x7e; }),
            "worker_id must be printable ASCII");
    require(m.org_id >= 0, "org_id must not be negative");
}
void validate(const Claim& m) {
    require(m.max_jobs >= 1 && m.max_jobs <= kMaxClaimJobs, "max_jobs must be 1..100");
    require(m.wait_ms >= 0 && m.wait_ms <= kMaxClaimWaitMs, "wait_ms must be 0..60000");
}
void validate(const Renew& m) {
    check_id(m);
}
void validate(const Complete& m) {
    check_id(m);
    require(!m.result_ref.empty() && m.result_ref.size() <= kMaxResultRefBytes,
            "result_ref must be 1..1024 bytes");
}
void validate(const Fail& m) {
    check_id(m);
    check_text(m.reason, "reason must be at most 1024 bytes");
}
void validate(const Release& m) {
    check_id(m);
}
void validate(const Bye&) {}
void validate(const Welcome& m) {
    require(m.org_id >= 0, "org_id must not be negative");
    require(m.lease_ms > 0 && m.heartbeat_ms > 0, "lease_ms and heartbeat_ms must be positive");
}
void validate(const Assigned& m) {
    require(!m.jobs.empty() && m.jobs.size() <= static_cast<std::size_t>(kMaxClaimJobs),
            "jobs must hold 1..100 entries");
    for (const auto& j : m.jobs) {
        check_id(j);
        require(j.lease_ms > 0, "lease_ms must be positive");
    }
}
void validate(const NoWork& m) {
    check_text(m.reason, "reason must be at most 1024 bytes");
}
void validate(const LeaseMsg& m) {
    check_id(m);
    require(m.lease_ms > 0, "lease_ms must be positive");
}
void validate(const Revoked& m) {
    check_id(m);
    check_text(m.reason, "reason must be at most 1024 bytes");
    check_text(m.detail, "detail must be at most 1024 bytes");
}
void validate(const Accepted& m) {
    check_id(m);
    check_text(m.state, "state must be at most 1024 bytes");
}
void validate(const Rejected& m) {
    check_id(m);
    check_text(m.reason, "reason must be at most 1024 bytes");
    check_text(m.detail, "detail must be at most 1024 bytes");
}
void validate(const Error& m) {
    require(!m.code.empty(), "code must not be empty");
    check_text(m.code, "code must be at most 1024 bytes");
    check_text(m.text, "text must be at most 1024 bytes");
}

using BodyDecoder = Message (*)(std::string_view body, Encoding enc, std::uint64_t& req);

template <class T>
Message decode_body(std::string_view body, Encoding enc, std::uint64_t& req) {
    T msg = enc == Encoding::Json ? read_json<T>(body) : read_binary<T>(body);
    req = msg.req;
    validate(msg);
    return msg;
}

template <std::size_t... I>
constexpr auto make_decoders(std::index_sequence<I...>) {
    return std::array<BodyDecoder, sizeof...(I)>{
        &decode_body<std::variant_alternative_t<I, Message>>...};
}
constexpr auto kDecoders = make_decoders(std::make_index_sequence<std::variant_size_v<Message>>{});

/// Best effort: the request id of a body that failed to decode, so a pipelining client can tell
/// which request the ERROR answers.
std::uint64_t salvage_req(std::string_view body, Encoding enc) noexcept {
    try {
        if (enc == Encoding::Binary) {
            // The endianness byte and the leading req field: nothing else is looked at.
            if (body.size() < 9) return 0;
            BoundedBinaryReader reader(body.substr(0, 9));
            std::uint64_t req = 0;
            reader(cereal::make_nvp("req", req));
            return req;
        }
        if (body.find('\0') != std::string_view::npos) return 0;
        rapidjson::Document doc;
        doc.Parse<rapidjson::kParseIterativeFlag>(body.data(), body.size());
        if (doc.HasParseError() || !doc.IsObject()) return 0;
        if (!doc.HasMember("req")) return 0;
        const rapidjson::Value& req = doc["req"];
        return req.IsUint64() ? req.GetUint64() : 0;
    } catch (...) {
        return 0;
    }
}

template <class T>
std::string write_body(const T& msg, Encoding enc) {
    std::ostringstream out;
    // serialize() only reads when saving; cereal itself casts constness away the same way.
    auto& m = const_cast<T&>(msg);
    if (enc == Encoding::Binary) {
        cereal::PortableBinaryOutputArchive ar(
            out, cereal::PortableBinaryOutputArchive::Options::LittleEndian());
        m.serialize(ar);
        return std::move(out).str();
    }
    {
        // Calling serialize directly, not ar(msg), keeps the members at the top level
        // instead of under cereal's "value0" wrapper.
        cereal::JSONOutputArchive ar(out, cereal::JSONOutputArchive::Options::NoIndent());
        m.serialize(ar);
    }
    // cereal always pretty-prints; raw newlines only occur between tokens (the writer escapes
    // control characters inside strings), so dropping them yields one line of the same JSON.
    auto text = std::move(out).str();
    std::erase(text, '\n');
    return text;
}

DecodeError failure(std::string_view code, std::string text, Encoding enc, std::uint64_t req = 0) {
    return DecodeError{std::string(code), std::move(text), enc, req};
}

}  // namespace

std::string_view type_name(const Message& m) {
    return kTypeNames[m.index()];
}

std::uint64_t request_id(const Message& m) {
    return std::visit([](const auto& msg) { return msg.req; }, m);
}

bool is_request(const Message& m) {
    return m.index() < kRequestTypes;
}

Frames encode(const Message& m, Encoding enc) {
    return Frames{std::string(enc == Encoding::Json ? kTagJson : kTagBinary),
                  std::string(type_name(m)),
                  std::visit([enc](const auto& msg) { return write_body(msg, enc); }, m)};
}

std::variant<Decoded, DecodeError> decode(const std::vector<std::string_view>& frames) {
    if (frames.size() != 3)
        return failure(errors::kMalformed,
                       "expected 3 frames [tag][type][body], got " + std::to_string(frames.size()),
                       Encoding::Binary);
    const auto tag = frames[0];
    const auto type = frames[1];
    const auto body = frames[2];

    const auto enc = tag.ends_with("+json") ? Encoding::Json : Encoding::Binary;
    if (!tag.starts_with("ACLAIM/"))
        return failure(errors::kWrongVersion, "tag frame must start with ACLAIM/", enc);
    if (tag != kTagBinary && tag != kTagJson)
        return failure(errors::kWrongVersion,
                       "unsupported protocol tag " + std::string(tag.substr(0, 64)) +
                           "; this side speaks ACLAIM/1 and ACLAIM/1+json",
                       enc);

    const auto found = std::find(kTypeNames.begin(), kTypeNames.end(), type);
    if (found == kTypeNames.end())
        return failure(errors::kUnknownType,
                       "unknown message type " + std::string(type.substr(0, 64)), enc);
    const auto index = static_cast<std::size_t>(found - kTypeNames.begin());

    const std::size_t limit =
        index < kRequestTypes ? kMaxBodyBytes : static_cast<std::size_t>(kMaxTransportBytes);
    if (body.size() > limit)
        return failure(errors::kOversized,
                       std::string(type) + " body of " + std::to_string(body.size()) +
                           " bytes exceeds the limit of " + std::to_string(limit),
                       enc, enc == Encoding::Binary ? salvage_req(body, enc) : 0);

    std::uint64_t req = 0;
    try {
        return Decoded{enc, kDecoders[index](body, enc, req)};
    } catch (const OutOfRange& e) {
        return failure(errors::kInvalid, std::string(type) + ": " + e.what(), enc, req);
    } catch (const std::exception& e) {
        return failure(errors::kUndecodable, std::string(type) + " body: " + e.what(), enc,
                       salvage_req(body, enc));
    } catch (...) {
        return failure(errors::kUndecodable, std::string(type) + " body could not be read", enc,
                       salvage_req(body, enc));
    }
}

}  // namespace aclaim::common::proto
