// clang-format off
// cereal's JSON archive must come before anything else pulls in rapidjson: it redefines
// RAPIDJSON_ASSERT to throw, and a rapidjson assert that aborts would let a peer kill us.
#include <cereal/archives/json.hpp>
#include <cereal/archives/portable_binary.hpp>
#include <cereal/types/string.hpp>
#include <cereal/types/vector.hpp>
#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
// clang-format on

#include "common/protocol.hpp"

#include <algorithm>
#include <array>
#include <concepts>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "common/protocol_serialize.hpp"

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
void check_id(std::int64_t job_id, std::int64_t generation) {
    require(job_id >= 0, "job_id must not be negative");
    require(generation >= 0, "generation must not be negative");
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
    check_id(m.job_id, m.generation);
}
void validate(const Complete& m) {
    check_id(m.job_id, m.generation);
    require(!m.result_ref.empty() && m.result_ref.size() <= kMaxResultRefBytes,
            "result_ref must be 1..1024 bytes");
}
void validate(const Fail& m) {
    check_id(m.job_id, m.generation);
    check_text(m.reason, "reason must be at most 1024 bytes");
}
void validate(const Release& m) {
    check_id(m.job_id, m.generation);
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
        check_id(j.job_id, j.generation);
        require(j.lease_ms > 0, "lease_ms must be positive");
    }
}
void validate(const NoWork& m) {
    check_text(m.reason, "reason must be at most 1024 bytes");
}
void validate(const LeaseMsg& m) {
    check_id(m.job_id, m.generation);
    require(m.lease_ms > 0, "lease_ms must be positive");
}
void validate(const Revoked& m) {
    check_id(m.job_id, m.generation);
    check_text(m.reason, "reason must be at most 1024 bytes");
    check_text(m.detail, "detail must be at most 1024 bytes");
}
void validate(const Accepted& m) {
    check_id(m.job_id, m.generation);
    check_text(m.state, "state must be at most 1024 bytes");
}
void validate(const Rejected& m) {
    check_id(m.job_id, m.generation);
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
        const auto it = doc.FindMember("req");
        return it != doc.MemberEnd() && it->value.IsUint64() ? it->value.GetUint64() : 0;
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

DecodeError failure(std::string code, std::string text, Encoding enc, std::uint64_t req = 0) {
    return DecodeError{std::move(code), std::move(text), enc, req};
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
        return failure("malformed",
                       "expected 3 frames [tag][type][body], got " + std::to_string(frames.size()),
                       Encoding::Binary);
    const auto tag = frames[0];
    const auto type = frames[1];
    const auto body = frames[2];

    const auto enc = tag.ends_with("+json") ? Encoding::Json : Encoding::Binary;
    if (!tag.starts_with("ACLAIM/"))
        return failure("wrong_version", "tag frame must start with ACLAIM/", enc);
    if (tag != kTagBinary && tag != kTagJson)
        return failure("wrong_version",
                       "unsupported protocol tag " + std::string(tag.substr(0, 64)) +
                           "; this side speaks ACLAIM/1 and ACLAIM/1+json",
                       enc);

    const auto found = std::find(kTypeNames.begin(), kTypeNames.end(), type);
    if (found == kTypeNames.end())
        return failure("unknown_type", "unknown message type " + std::string(type.substr(0, 64)),
                       enc);
    const auto index = static_cast<std::size_t>(found - kTypeNames.begin());

    const std::size_t limit =
        index < kRequestTypes ? kMaxBodyBytes : static_cast<std::size_t>(kMaxTransportBytes);
    if (body.size() > limit)
        return failure("oversized",
                       std::string(type) + " body of " + std::to_string(body.size()) +
                           " bytes exceeds the limit of " + std::to_string(limit),
                       enc, enc == Encoding::Binary ? salvage_req(body, enc) : 0);

    std::uint64_t req = 0;
    try {
        return Decoded{enc, kDecoders[index](body, enc, req)};
    } catch (const OutOfRange& e) {
        return failure("invalid", std::string(type) + ": " + e.what(), enc, req);
    } catch (const std::exception& e) {
        return failure("undecodable", std::string(type) + " body: " + e.what(), enc,
                       salvage_req(body, enc));
    } catch (...) {
        return failure("undecodable", std::string(type) + " body could not be read", enc,
                       salvage_req(body, enc));
    }
}

}  // namespace aclaim::common::proto
