// clang-format off
// cereal's JSON archive must come before anything else pulls in rapidjson: it redefines
// RAPIDJSON_ASSERT to throw, and a rapidjson assert that aborts would let a peer kill us.
#include <cereal/archives/json.hpp>
#include <cereal/archives/portable_binary.hpp>
#include <cereal/types/string.hpp>
#include <cereal/types/vector.hpp>
// clang-format on

#include "common/proto/protocol.hpp"

#include <algorithm>
#include <array>
#include <concepts>
#include <limits>
#include <optional>
#include <sstream>
#include <utility>

#include "common/base/queue_name.hpp"
#include "common/proto/decode_detail.hpp"
#include "common/proto/protocol_serialize.hpp"
#include "common/proto/wire_errors.hpp"

namespace aclaim::proto {

namespace {

using detail::byte_hex;
using detail::json_req;
using detail::OutOfRange;
using detail::read_json;
using detail::Unreadable;

/// Type frame names, in the order of the Message alternatives.
constexpr std::array<std::string_view, std::variant_size_v<Message>> kTypeNames = {
    "HELLO",    "CLAIM",    "RENEW",    "COMPLETE", "FAIL",  "RELEASE",
    "BYE",      "WELCOME",  "ASSIGNED", "NO_WORK",  "LEASE", "REVOKED",
    "ACCEPTED", "REJECTED", "ERROR",    "PROGRESS", "PARK",  "PARKED"};
/// HELLO .. BYE come first in Message, then the replies; PROGRESS (protocol 1.5) and PARK (1.6)
/// after them.
constexpr std::size_t kRequestTypes = 7;
constexpr std::size_t kProgressIndex = 15;
constexpr std::size_t kParkIndex = 16;
static_assert(std::is_same_v<std::variant_alternative_t<kProgressIndex, Message>, Progress>);
static_assert(std::is_same_v<std::variant_alternative_t<kParkIndex, Message>, Park>);
constexpr bool request_index(std::size_t index) {
    return index < kRequestTypes || index == kProgressIndex || index == kParkIndex;
}
/// Reads cereal portable binary without trusting it: every length prefix is checked against the
/// bytes that remain before anything is allocated, so a 2^60 prefix costs nothing.
class BoundedBinaryReader {
  public:
    explicit BoundedBinaryReader(std::string_view in) : in_(in) {
        const auto flag = take(1)[0];
        if (flag != 0 && flag != 1)
            throw Unreadable("the leading endianness byte must be 0x00 or 0x01, got 0x" +
                             byte_hex(flag));
        little_endian_ = flag == 1;
    }

    template <class... T>
    void operator()(cereal::NameValuePair<T>&&... fields) {
        ((field_ = fields.name, read(fields.value)), ...);
    }

    /// A member a peer may leave out (protocol_serialize.hpp): it is last, so present exactly
    /// when bytes remain.
    template <class T>
    void optional_member(cereal::NameValuePair<T>&& field) {
        if (!in_.empty()) (*this)(std::move(field));
    }

    void expect_end() const {
        if (!in_.empty())
            throw Unreadable(std::to_string(in_.size()) + " trailing bytes after the body");
    }

  private:
    std::string_view take(std::size_t n) {
        if (n > in_.size())
            throw Unreadable("truncated in field '" + where() + "': needs " + std::to_string(n) +
                             " more bytes, " + std::to_string(in_.size()) + " left");
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
        if (b != 0 && b != 1)
            throw Unreadable("field '" + where() +
                             "' is a bool: its byte must be 0x00 "
                             "or 0x01, got 0x" +
                             byte_hex(b));
        value = b == 1;
    }

    std::uint64_t read_size() {
        std::uint64_t n = 0;
        read(n);
        if (n > in_.size())
            throw Unreadable("field '" + where() + "': length prefix " + std::to_string(n) +
                             " exceeds the " + std::to_string(in_.size()) + " bytes left");
        return n;
    }

    void read(std::string& value) { value = std::string(take(read_size())); }

    /// A scalar optional member (protocol 1.4): read only when present.
    template <std::integral I>
    void read(std::optional<I>& value) {
        I v{};
        read(v);
        value = v;
    }

    /// A nested message: an ASSIGNED's jobs, a COMPLETE's next claim, a RENEW's held jobs.
    template <class M>
    requires std::is_same_v<M, AssignedJob> || std::is_same_v<M, Claim> ||
        std::is_same_v<M, HeldRenewal> || std::is_same_v<M, ResumeFrom>
    void read(M& value) { value.serialize(*this); }

    template <class T>
    void read(std::vector<T>& value) {
        // Elements are appended as they are read, so memory follows the bytes actually present.
        const auto n = read_size();
        value.clear();
        if constexpr (std::is_class_v<T> && !std::is_same_v<T, std::string>) {
            // A nested message's fields are named by their path in texts: "held[1].req".
            const std::string outer = path_;
            const std::string name = field_;
            for (std::uint64_t i = 0; i < n; ++i) {
                path_ = outer + name + "[" + std::to_string(i) + "].";
                read(value.emplace_back());
            }
            path_ = outer;
        } else {
            for (std::uint64_t i = 0; i < n; ++i) read(value.emplace_back());
        }
    }

    /// The field being read, with the path of the nested message it is in.
    std::string where() const { return path_ + field_; }

    std::string_view in_;
    bool little_endian_ = true;
    /// The field being read, for error texts.
    const char* field_ = "endianness";
    /// Where a nested message being read is, e.g. "held[1]."; empty at the top.
    std::string path_;
};

template <class T>
T read_binary(std::string_view body) {
    BoundedBinaryReader reader(body);
    T msg;
    msg.serialize(reader);
    reader.expect_end();
    return msg;
}

// ---- field ranges ----

/// "field 'max_jobs' is 0; it must be 1..100"
[[noreturn]] void out_of_range(std::string_view field, const std::string& found,
                               std::string_view rule) {
    throw OutOfRange("field '" + std::string(field) + "' is " + found + "; it must be " +
                     std::string(rule));
}
template <std::integral I>
void require_range(I value, I low, I high, std::string_view field, std::string_view rule) {
    if (value < low || value > high) out_of_range(field, std::to_string(value), rule);
}
template <std::integral I>
void require_not_negative(I value, std::string_view field) {
    if (value < 0) out_of_range(field, std::to_string(value), "0 or more");
}
void require_length(const std::string& s, std::size_t low, std::size_t high, std::string_view field,
                    std::string_view rule) {
    if (s.size() < low || s.size() > high)
        out_of_range(field, std::to_string(s.size()) + " bytes long", rule);
}
/// Any message or job that names a job by id and generation; `prefix` locates a nested job.
template <class M>
void check_id(const M& m, const std::string& prefix = "") {
    require_not_negative(m.job_id, prefix + "job_id");
    require_not_negative(m.generation, prefix + "generation");
}
/// Request strings are stored as text: in the binary encoding, where a string may hold any
/// bytes, one that is not UTF-8 would only fail later, at the database, as a database_error.
void require_utf8(const std::string& s, std::string_view field) {
    const auto problem = detail::utf8_problem(s);
    if (!problem.empty())
        throw OutOfRange("field '" + std::string(field) + "' is not UTF-8 text: it holds " +
                         problem);
}
void check_text(const std::string& s, std::string_view field) {
    require_length(s, 0, kMaxTextBytes, field, "at most 1024 bytes");
}
/// A request string the database stores as text: within its length bounds, and UTF-8.
void require_stored_text(const std::string& s, std::size_t low, std::size_t high,
                         std::string_view field, std::string_view rule) {
    require_length(s, low, high, field, rule);
    require_utf8(s, field);
}

/// HELLO's and WELCOME's feature names: a few short printable words.
void check_features(const std::vector<std::string>& features) {
    if (features.size() > kMaxFeatures)
        out_of_range("features", std::to_string(features.size()) + " names",
                     "at most " + std::to_string(kMaxFeatures));
    for (std::size_t i = 0; i < features.size(); ++i) {
        const auto& f = features[i];
        const bool printable =
            std::all_of(f.begin(), f.end(), [](char c) { return c > 0x20 && c < 0x7f; });
        if (f.empty() || f.size() > kMaxFeatureBytes || !printable)
            out_of_range("features[" + std::to_string(i) + "]", "'" + quote_peer_bytes(f, 80) + "'",
                         "1..64 printable ASCII bytes without spaces");
    }
}

void validate(const Hello& m) {
    require_length(m.worker_id, 1, kMaxWorkerIdBytes, "worker_id", "1..128 bytes");
    const auto bad = std::find_if(m.worker_id.begin(), m.worker_id.end(),
                                  [](char c) { return c < 0x20 || c > 0x7e; });
    if (bad != m.worker_id.end())
        out_of_range("worker_id", "'" + quote_peer_bytes(m.worker_id, 160) + "'",
                     "printable ASCII (bytes 0x20..0x7e); byte " +
                         std::to_string(bad - m.worker_id.begin()) + " is 0x" + byte_hex(*bad));
    require_not_negative(m.org_id, "org_id");
    if (m.queues.size() > kMaxQueues)
        out_of_range("queues", std::to_string(m.queues.size()) + " queues",
                     "at most " + std::to_string(kMaxQueues));
    for (std::size_t i = 0; i < m.queues.size(); ++i) {
        if (!base::valid_queue_name(m.queues[i]))
            out_of_range("queues[" + std::to_string(i) + "]",
                         "'" + quote_peer_bytes(m.queues[i], 80) + "'",
                         "a queue name: 1..64 of A-Z a-z 0-9 _ . : -, starting with a letter or "
                         "digit");
    }
    check_features(m.features);
}
void validate(const Claim& m, const std::string& prefix = "") {
    require_range(m.max_jobs, 1, kMaxClaimJobs, prefix + "max_jobs", "1..100");
    require_range(m.wait_ms, 0, kMaxClaimWaitMs, prefix + "wait_ms", "0..60000");
}
void validate(const Renew& m) {
    check_id(m);
    if (m.held.size() > kMaxHeldRenewals - 1)
        out_of_range("held", "an array of " + std::to_string(m.held.size()) + " jobs",
                     "at most " + std::to_string(kMaxHeldRenewals - 1) +
                         " (a RENEW names at most " + std::to_string(kMaxHeldRenewals) + " jobs)");
    // Each job's answer carries its entry's req, so no two may share one.
    std::vector<std::uint64_t> reqs{m.req};
    reqs.reserve(m.held.size() + 1);
    for (std::size_t i = 0; i < m.held.size(); ++i) {
        const auto prefix = "held[" + std::to_string(i) + "].";
        check_id(m.held[i], prefix);
        reqs.push_back(m.held[i].req);
    }
    if (m.held.empty()) return;
    std::sort(reqs.begin(), reqs.end());
    const auto twice = std::adjacent_find(reqs.begin(), reqs.end());
    if (twice == reqs.end()) return;
    // Name the first entry that repeats an id, for the person reading the text.
    for (std::size_t i = 0; i < m.held.size(); ++i) {
        if (m.held[i].req != *twice) continue;
        out_of_range("held[" + std::to_string(i) + "].req", std::to_string(m.held[i].req),
                     "a request id of its own, other than the RENEW's and every other entry's");
    }
}
void validate(const Complete& m) {
    check_id(m);
    require_stored_text(m.result_ref, 1, kMaxResultRefBytes, "result_ref", "1..1024 bytes");
    if (m.next.size() > 1)
        out_of_range("next", "an array of " + std::to_string(m.next.size()) + " claims",
                     "at most 1 claim");
    if (!m.next.empty()) {
        validate(m.next.front(), "next[0].");
        if (m.next.front().req == m.req)
            out_of_range("next[0].req", std::to_string(m.next.front().req),
                         "a request id other than the COMPLETE's own");
    }
}
void validate(const Fail& m) {
    check_id(m);
    require_stored_text(m.reason, 0, kMaxTextBytes, "reason", "at most 1024 bytes");
}
void validate(const Release& m) {
    check_id(m);
}
void validate(const Bye&) {}
void validate(const Progress& m) {
    check_id(m);
    require_range(m.percent, 0, 100, "percent", "0..100");
    require_stored_text(m.note, 0, kMaxProgressNoteBytes, "note", "at most 200 bytes");
    require_stored_text(m.checkpoint, 0, kMaxCheckpointBytes, "checkpoint", "at most 4096 bytes");
}
void validate(const Park& m) {
    check_id(m);
    require_range(m.timeout_ms, std::int64_t{1}, kMaxParkTimeoutMs, "timeout_ms",
                  "1..2592000000 (30 days)");
    require_stored_text(m.note, 0, kMaxProgressNoteBytes, "note", "at most 200 bytes");
}
void validate(const Parked& m) {
    check_id(m);
    require_length(m.token, kParkTokenChars, kParkTokenChars, "token", "64 hex digits");
    require_not_negative(m.deadline_us, "deadline_us");
}
void validate(const Welcome& m) {
    require_not_negative(m.org_id, "org_id");
    require_range(m.lease_ms, 1, std::numeric_limits<std::int32_t>::max(), "lease_ms", "positive");
    require_range(m.heartbeat_ms, 1, std::numeric_limits<std::int32_t>::max(), "heartbeat_ms",
                  "positive");
    check_features(m.features);
    if (m.sessions) require_not_negative(*m.sessions, "sessions");
}
void validate(const Assigned& m) {
    if (m.jobs.empty() || m.jobs.size() > static_cast<std::size_t>(kMaxClaimJobs))
        out_of_range("jobs", "an array of " + std::to_string(m.jobs.size()) + " entries",
                     "1..100 entries");
    for (std::size_t i = 0; i < m.jobs.size(); ++i) {
        const auto prefix = "jobs[" + std::to_string(i) + "].";
        check_id(m.jobs[i], prefix);
        require_range(m.jobs[i].lease_ms, 1, std::numeric_limits<std::int32_t>::max(),
                      prefix + "lease_ms", "positive");
    }
    if (m.resume.size() > m.jobs.size())
        out_of_range("resume", "an array of " + std::to_string(m.resume.size()) + " entries",
                     "at most one entry per job");
    for (std::size_t i = 0; i < m.resume.size(); ++i) {
        const auto prefix = "resume[" + std::to_string(i) + "].";
        check_id(m.resume[i], prefix);
        require_range(m.resume[i].percent, 0, 100, prefix + "percent", "0..100");
        require_length(m.resume[i].note, 0, kMaxProgressNoteBytes, prefix + "note",
                       "at most 200 bytes");
        require_length(m.resume[i].checkpoint, 0, kMaxCheckpointBytes, prefix + "checkpoint",
                       "at most 4096 bytes");
    }
}
void validate(const NoWork& m) {
    check_text(m.reason, "reason");
}
void validate(const LeaseMsg& m) {
    check_id(m);
    require_range(m.lease_ms, 1, std::numeric_limits<std::int32_t>::max(), "lease_ms", "positive");
}
void validate(const Revoked& m) {
    check_id(m);
    check_text(m.reason, "reason");
    check_text(m.detail, "detail");
}
void validate(const Accepted& m) {
    check_id(m);
    check_text(m.state, "state");
}
void validate(const Rejected& m) {
    check_id(m);
    check_text(m.reason, "reason");
    check_text(m.detail, "detail");
}
void validate(const Error& m) {
    require_length(m.code, 1, kMaxTextBytes, "code", "1..1024 bytes");
    check_text(m.text, "text");
    if (m.retry_after_ms)
        require_range(*m.retry_after_ms, 0, kMaxRetryAfterMs, "retry_after_ms", "0..600000");
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
/// which request the ERROR answers. Binary: the 8 bytes after the endianness byte. JSON: a
/// top-level "req" holding an unsigned 64-bit integer, found before the body stops parsing.
std::uint64_t salvage_req(std::string_view body, Encoding enc) noexcept {
    try {
        if (enc == Encoding::Binary) {
            if (body.size() < 9) return 0;
            BoundedBinaryReader reader(body.substr(0, 9));
            std::uint64_t req = 0;
            reader(cereal::make_nvp("req", req));
            return req;
        }
        return json_req(body);
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
    return request_index(m.index());
}

Frames encode(const Message& m, Encoding enc) {
    return Frames{std::string(enc == Encoding::Json ? kTagJson : kTagBinary),
                  std::string(type_name(m)),
                  std::visit([enc](const auto& msg) { return write_body(msg, enc); }, m)};
}

std::variant<Decoded, DecodeError> decode(const std::vector<std::string_view>& frames,
                                          const DecodeLimits& limits) {
    const auto frame_count = std::max(limits.frame_count, frames.size());
    // A reply follows the tag: JSON for a tag ending in "+json", binary otherwise.
    const auto enc =
        !frames.empty() && frames[0].ends_with("+json") ? Encoding::Json : Encoding::Binary;
    if (frame_count != 3)
        return failure(errors::kMalformed,
                       "a message must have exactly 3 frames [tag][type][body], this one has " +
                           std::to_string(frame_count),
                       enc);
    const auto tag = frames[0];
    const auto type = frames[1];
    const auto body = frames[2];

    if (tag != kTagBinary && tag != kTagJson)
        return failure(errors::kWrongVersion,
                       "unsupported protocol tag '" + quote_peer_bytes(tag) +
                           "'; this coordinator speaks ACLAIM/1 and ACLAIM/1+json",
                       enc);

    const auto found = std::find(kTypeNames.begin(), kTypeNames.end(), type);
    if (found == kTypeNames.end())
        return failure(errors::kUnknownType,
                       "unknown message type '" + quote_peer_bytes(type) +
                           "'; types are written in capitals, e.g. CLAIM",
                       enc);
    const auto index = static_cast<std::size_t>(found - kTypeNames.begin());

    const std::size_t limit = request_index(index) ? limits.max_request_body_bytes
                                                   : static_cast<std::size_t>(kMaxTransportBytes);
    if (body.size() > limit)
        return failure(errors::kOversized,
                       std::string(type) + " body of " + std::to_string(body.size()) +
                           " bytes exceeds the limit of " + std::to_string(limit) + " bytes",
                       enc, salvage_req(body, enc));

    std::uint64_t req = 0;
    try {
        return Decoded{enc, kDecoders[index](body, enc, req)};
    } catch (const OutOfRange& e) {
        return failure(errors::kInvalid, std::string(type) + ": " + e.what(), enc, req);
    } catch (const Unreadable& e) {
        return failure(errors::kUndecodable, std::string(type) + " body: " + e.what(), enc,
                       salvage_req(body, enc));
    } catch (...) {
        // Nothing else is expected from the readers above; a person still gets a sentence.
        return failure(errors::kUndecodable,
                       std::string(type) + " body could not be read in the " +
                           (enc == Encoding::Json ? "JSON" : "binary") + " encoding",
                       enc, salvage_req(body, enc));
    }
}

}  // namespace aclaim::proto
