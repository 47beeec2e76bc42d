// clang-format off
// cereal's JSON archive must come before anything else pulls in rapidjson: it redefines
// RAPIDJSON_ASSERT to throw, and a rapidjson assert that aborts would let a peer kill us.
#include <cereal/archives/json.hpp>
#include <rapidjson/document.h>
#include <rapidjson/encodedstream.h>
#include <rapidjson/error/en.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>
// clang-format on

#include <algorithm>
#include <charconv>
#include <concepts>
#include <initializer_list>
#include <limits>
#include <optional>
#include <utility>
#include <variant>
#include <vector>

#include "common/proto/decode_detail.hpp"
#include "common/proto/protocol.hpp"
#include "common/proto/protocol_serialize.hpp"

namespace aclaim::proto::detail {

namespace {

/// Our deepest body is object -> jobs array -> object; anything deeper is hostile.
constexpr int kMaxJsonDepth = 4;
/// Most bytes of a peer's member name quoted in an error text, which must stay within
/// kMaxTextBytes.
constexpr std::size_t kMaxQuotedNameBytes = 64;

/// Rejects raw NUL bytes (rapidjson would stop there and ignore the rest) and nesting deeper than
/// any body needs, before a recursive parser sees the text.
void check_json_shape(std::string_view body) {
    int depth = 0;
    bool in_string = false;
    bool escaped = false;
    for (std::size_t i = 0; i < body.size(); ++i) {
        const char c = body[i];
        if (c == '\0')
            throw Unreadable("raw NUL byte at offset " + std::to_string(i) +
                             "; a JSON body may hold none");
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
            if (++depth > kMaxJsonDepth)
                throw Unreadable("objects and arrays nested more than " +
                                 std::to_string(kMaxJsonDepth) + " deep at offset " +
                                 std::to_string(i) + "; no message needs more");
        } else if (c == '}' || c == ']') {
            --depth;
        }
    }
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
    bool StartObject() { return open(true); }
    bool EndObject(rapidjson::SizeType) { return close(); }
    bool StartArray() { return open(false); }
    bool EndArray(rapidjson::SizeType) { return close(); }

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

    bool open(bool object) {
        levels_.emplace_back().object = object;
        return true;
    }
    /// An object or array ends: a value of the level around it is done.
    bool close() {
        levels_.pop_back();
        return Default();
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
        return quote_peer_bytes(name, kMaxQuotedNameBytes);
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

    std::string_view body_;
    std::vector<Level> levels_;
    std::string problem_;
};

/// What a JSON value is, for an error text: "a string", "the integer -1", ...
std::string value_class(const rapidjson::Value& v) {
    if (v.IsNull()) return "null";
    if (v.IsBool()) return "a boolean";
    if (v.IsString()) return "a string";
    if (v.IsObject()) return "an object";
    if (v.IsArray()) return "an array";
    if (v.IsInt64()) return "the integer " + std::to_string(v.GetInt64());
    if (v.IsUint64()) return "the integer " + std::to_string(v.GetUint64());
    return "a number with a fraction or an exponent, or beyond 64 bits";
}

template <std::integral I>
std::string integer_type() {
    const std::string name =
        std::string(std::is_signed_v<I> ? "int" : "uint") + std::to_string(8 * sizeof(I));
    return name + " (" + std::to_string(std::numeric_limits<I>::min()) + ".." +
           std::to_string(std::numeric_limits<I>::max()) + ")";
}

/// Reads a JSON object into a message's fields by name, refusing, with a text that names the
/// field, the kind of value found and the rule, anything cereal's JSON archive would get wrong:
/// it ignores extra members, takes the last of repeated ones, stops a string at an escaped NUL,
/// and reports a mistyped value only as a rapidjson assertion.
class JsonFieldReader {
  public:
    /// Reads a message or element `out` from `object`; `path` names the object in texts: "" for
    /// the body, "jobs[0]" for an element. The members are checked as a whole first.
    template <class M>
    static void read_object(const rapidjson::Value& object, std::string path, M& out) {
        MemberNames names;
        M().serialize(names);
        JsonFieldReader reader(object, std::move(path));
        reader.check_members(names);
        out.serialize(reader);
    }

    template <class... T>
    void operator()(cereal::NameValuePair<T>&&... fields) {
        (read(object_.FindMember(fields.name)->value, fields.name, fields.value), ...);
    }

    /// A member a peer may leave out (protocol_serialize.hpp): read when present.
    template <class T>
    void optional_member(cereal::NameValuePair<T>&& field) {
        const auto found = object_.FindMember(field.name);
        if (found != object_.MemberEnd()) read(found->value, field.name, field.value);
    }

  private:
    /// A message's member names, collected before any value is read.
    struct MemberNames {
        std::vector<const char*> required;
        std::vector<const char*> optional;
        template <class... T>
        void operator()(cereal::NameValuePair<T>&&... fields) {
            (required.push_back(fields.name), ...);
        }
        template <class T>
        void optional_member(cereal::NameValuePair<T>&& field) {
            optional.push_back(field.name);
        }
    };

    JsonFieldReader(const rapidjson::Value& object, std::string path)
        : object_(object), path_(std::move(path)) {}

    std::string field(const char* name) const {
        return "field '" + (path_.empty() ? "" : path_ + ".") + name + "'";
    }
    std::string where() const { return path_.empty() ? "" : " in '" + path_ + "'"; }

    void check_members(const MemberNames& members) const {
        const std::vector<const char*>& required = members.required;
        std::vector<const char*> names = required;
        names.insert(names.end(), members.optional.begin(), members.optional.end());
        std::vector<bool> seen(names.size(), false);
        for (auto it = object_.MemberBegin(); it != object_.MemberEnd(); ++it) {
            const std::string_view name(it->name.GetString(), it->name.GetStringLength());
            const auto known = std::find(names.begin(), names.end(), name);
            if (known == names.end()) {
                std::string list;
                for (const char* n : names) list += (list.empty() ? "" : ", ") + std::string(n);
                throw Unreadable("unknown member '" + quote_peer_bytes(name) + "'" + where() +
                                 "; the members are exactly " + list);
            }
            const auto index = static_cast<std::size_t>(known - names.begin());
            if (seen[index])
                throw Unreadable("member '" + std::string(name) + "'" + where() +
                                 " appears more than once");
            seen[index] = true;
        }
        for (std::size_t i = 0; i < required.size(); ++i) {
            if (!seen[i])
                throw Unreadable("missing member '" + std::string(required[i]) + "'" + where());
        }
    }

    template <std::integral I>
    void read(const rapidjson::Value& v, const char* name, I& out) {
        if (v.IsInt64() && std::in_range<I>(v.GetInt64())) {
            out = static_cast<I>(v.GetInt64());
        } else if (v.IsUint64() && std::in_range<I>(v.GetUint64())) {
            out = static_cast<I>(v.GetUint64());
        } else {
            throw Unreadable(field(name) + " must be an integer within " + integer_type<I>() +
                             ", got " + value_class(v));
        }
    }

    /// A scalar optional member (protocol 1.4), present.
    template <std::integral I>
    void read(const rapidjson::Value& v, const char* name, std::optional<I>& out) {
        I value{};
        read(v, name, value);
        out = value;
    }

    void read(const rapidjson::Value& v, const char* name, bool& out) {
        if (!v.IsBool())
            throw Unreadable(field(name) + " must be true or false, got " + value_class(v));
        out = v.GetBool();
    }

    void read(const rapidjson::Value& v, const char* name, std::string& out) {
        if (!v.IsString())
            throw Unreadable(field(name) + " must be a string, got " + value_class(v));
        out.assign(v.GetString(), v.GetStringLength());
        if (out.find('\0') != std::string::npos)
            throw Unreadable(field(name) + " holds \\u0000, which no string may contain");
    }

    void read(const rapidjson::Value& v, const char* name, std::vector<std::string>& out) {
        if (!v.IsArray())
            throw Unreadable(field(name) + " must be an array of strings, got " + value_class(v));
        out.clear();
        for (rapidjson::SizeType i = 0; i < v.Size(); ++i) {
            const std::string element = std::string(name) + "[" + std::to_string(i) + "]";
            read(v[i], element.c_str(), out.emplace_back());
        }
    }

    /// An array of nested objects: an ASSIGNED's jobs, a COMPLETE's next claim, a RENEW's held
    /// jobs.
    template <class M>
    requires std::is_same_v<M, AssignedJob> || std::is_same_v<M, Claim> ||
        std::is_same_v<M, HeldRenewal> || std::is_same_v<M, ResumeFrom>
    void read(const rapidjson::Value& v, const char* name, std::vector<M>& out) {
        if (!v.IsArray())
            throw Unreadable(field(name) + " must be an array of objects, got " + value_class(v));
        out.clear();
        for (rapidjson::SizeType i = 0; i < v.Size(); ++i) {
            const auto element =
                (path_.empty() ? "" : path_ + ".") + name + "[" + std::to_string(i) + "]";
            if (!v[i].IsObject())
                throw Unreadable("'" + element + "' must be an object, got " + value_class(v[i]));
            read_object(v[i], element, out.emplace_back());
        }
    }

    const rapidjson::Value& object_;
    std::string path_;
};

}  // namespace

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
    if (!doc.IsObject())
        throw Unreadable("the body must be a JSON object, got " + value_class(doc));
    T msg;
    JsonFieldReader::read_object(doc, "", msg);
    return msg;
}

// One reader per message type; protocol.cpp picks them by the type frame.
template Hello read_json<Hello>(std::string_view);
template Claim read_json<Claim>(std::string_view);
template Renew read_json<Renew>(std::string_view);
template Complete read_json<Complete>(std::string_view);
template Fail read_json<Fail>(std::string_view);
template Release read_json<Release>(std::string_view);
template Bye read_json<Bye>(std::string_view);
template Welcome read_json<Welcome>(std::string_view);
template Assigned read_json<Assigned>(std::string_view);
template NoWork read_json<NoWork>(std::string_view);
template LeaseMsg read_json<LeaseMsg>(std::string_view);
template Revoked read_json<Revoked>(std::string_view);
template Accepted read_json<Accepted>(std::string_view);
template Rejected read_json<Rejected>(std::string_view);
template Error read_json<Error>(std::string_view);
template Progress read_json<Progress>(std::string_view);
template Park read_json<Park>(std::string_view);
template Parked read_json<Parked>(std::string_view);

namespace {

/// Finds the top-level "req" of a JSON body that may be broken further on: the reader stops at
/// the first event after it, so what follows (bad escapes, trailing bytes) does not matter.
class JsonReqFinder : public rapidjson::BaseReaderHandler<rapidjson::UTF8<>, JsonReqFinder> {
  public:
    std::uint64_t req = 0;

    bool Default() { return !at_req(); }
    bool Uint(unsigned u) { return integer(u); }
    bool Uint64(std::uint64_t u) { return integer(u); }
    bool Int(int i) { return i >= 0 ? integer(static_cast<std::uint64_t>(i)) : Default(); }
    bool Int64(std::int64_t i) {
        return i >= 0 ? integer(static_cast<std::uint64_t>(i)) : Default();
    }
    bool Key(const char* s, rapidjson::SizeType length, bool) {
        next_is_req_ = depth_ == 1 && std::string_view(s, length) == "req";
        return true;
    }
    bool StartObject() { return open(); }
    bool StartArray() { return open(); }
    bool EndObject(rapidjson::SizeType) { return close(); }
    bool EndArray(rapidjson::SizeType) { return close(); }

  private:
    bool at_req() const { return depth_ == 1 && next_is_req_; }
    bool integer(std::uint64_t value) {
        if (!at_req()) return true;
        req = value;
        return false;
    }
    bool open() {
        if (at_req()) return false;
        ++depth_;
        return true;
    }
    bool close() {
        --depth_;
        return true;
    }

    int depth_ = 0;
    bool next_is_req_ = false;
};

}  // namespace

std::uint64_t json_req(std::string_view body) noexcept {
    try {
        rapidjson::MemoryStream bytes(body.data(), body.size());
        JsonReqFinder finder;
        rapidjson::Reader reader;
        reader.Parse<rapidjson::kParseIterativeFlag>(bytes, finder);
        return finder.req;
    } catch (...) {
        return 0;
    }
}

}  // namespace aclaim::proto::detail
