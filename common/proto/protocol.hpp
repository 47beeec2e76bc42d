#pragma once

// The aclaim wire protocol: every message a worker and a coordinator exchange, in one header.
//
// A message is three ZeroMQ frames: [tag][type][body].
//   tag  : "ACLAIM/1" (body in cereal portable binary) or "ACLAIM/1+json" (body is a JSON object
//          whose members are the struct's fields, by name). A reply uses the request's encoding.
//   type : the message type name in capitals, e.g. "CLAIM".
//   body : the struct below, encoded as the tag says.
// The coordinator's ROUTER adds the peer's routing identity in front. docs/protocol.md specifies
// every field and both encodings.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace aclaim::proto {

/// The protocol versions this build speaks, 1.0 to 1.6 (docs/protocol.md, "Version history"). The
/// tag names the major version only: what a minor version added is optional (1.1) or given only to
/// a worker that asks for it (1.2 to 1.6), so one tag serves them all.
inline constexpr int kProtocolMajor = 1;
inline constexpr int kProtocolOldestMinor = 0;
inline constexpr int kProtocolNewestMinor = 6;
inline constexpr std::string_view kTagBinary = "ACLAIM/1";
inline constexpr std::string_view kTagJson = "ACLAIM/1+json";
/// Bodies above this size are refused with ERROR "oversized".
inline constexpr std::size_t kMaxBodyBytes = std::size_t{64} * 1024;
/// Largest frame a peer may send: a longer one makes the transport drop the connection unanswered.
inline constexpr std::int64_t kMaxTransportBytes = std::int64_t{1024} * 1024;
/// What CURVE adds to every frame on the wire: the MESSAGE command's name (8 bytes), its nonce
/// (8), the flags byte and the 16-byte authenticator. libzmq applies ZMQ_MAXMSGSIZE to the
/// encrypted frame, so under CURVE the socket limit must be this much larger.
inline constexpr std::int64_t kCurveFrameOverhead = 33;
/// The ZMQ_MAXMSGSIZE that lets a frame of exactly kMaxTransportBytes through, and nothing longer.
inline constexpr std::int64_t socket_max_message_size(bool curve) {
    return kMaxTransportBytes + (curve ? kCurveFrameOverhead : 0);
}
/// Field limits enforced by decode(); a request outside them is answered ERROR "invalid".
inline constexpr std::size_t kMaxWorkerIdBytes = 128;
inline constexpr std::int32_t kMaxClaimJobs = 100;
inline constexpr std::int32_t kMaxClaimWaitMs = 60000;
inline constexpr std::size_t kMaxResultRefBytes = 1024;
/// Queues one HELLO may name.
inline constexpr std::size_t kMaxQueues = 32;
/// Features one HELLO or WELCOME may name, and the longest name.
inline constexpr std::size_t kMaxFeatures = 16;
inline constexpr std::size_t kMaxFeatureBytes = 64;
/// Protocol 1.2: COMPLETE may carry the worker's next CLAIM (`next`), answered ACCEPTED (or
/// REJECTED) and then ASSIGNED or NO_WORK, both committed in one transaction where it can.
inline constexpr std::string_view kFeatureCompleteClaim = "complete_claim";
/// Protocol 1.3: one RENEW renews every job a worker holds (`held`), each job answered LEASE or
/// REVOKED on its own, under its own request id; the coordinator renews them in one statement.
inline constexpr std::string_view kFeatureRenewHeld = "renew_held";
/// Jobs one RENEW may name: its own and at most kMaxHeldRenewals - 1 in `held`.
inline constexpr std::size_t kMaxHeldRenewals = 1024;
/// Protocol 1.4: WELCOME tells the worker how many sessions the coordinator has (`sessions`), and
/// an ERROR `draining` or `overloaded` says when to come back (`retry_after_ms`), so that a fleet
/// spreads its reconnections (docs/protocol.md, "Reconnecting a fleet").
inline constexpr std::string_view kFeatureReconnectHints = "reconnect_hints";
/// The most an ERROR's retry_after_ms may say: ten minutes.
inline constexpr std::int32_t kMaxRetryAfterMs = 600000;
/// Protocol 1.5: PROGRESS reports how far a held job is (a percentage, a note and a checkpoint),
/// and ASSIGNED hands the last checkpoint of a job to its next holder (`resume`), so that a
/// reviewer taking over a reclaimed or retried job resumes where the last one stopped.
inline constexpr std::string_view kFeatureProgress = "progress";
/// PROGRESS's bounds: a note of at most 200 bytes and a checkpoint of at most 4 KiB, both UTF-8.
inline constexpr std::size_t kMaxProgressNoteBytes = 200;
inline constexpr std::size_t kMaxCheckpointBytes = 4096;
/// Protocol 1.6: PARK hands a held job to an outside system, answered PARKED with a callback
/// token bound to the job and its generation; the outside system finishes the job with the token
/// (aclaim_finish_parked over SQL, or the coordinator's POST /v1/callback) before the deadline,
/// or the queue's retry policy applies.
inline constexpr std::string_view kFeaturePark = "park";
/// PARK's timeout: at least 1 ms, at most 30 days.
inline constexpr std::int64_t kMaxParkTimeoutMs = std::int64_t{30} * 24 * 3600 * 1000;
/// A callback token on the wire: 32 random bytes as 64 lowercase hex digits.
inline constexpr std::size_t kParkTokenChars = 64;
/// Reasons, details, states and error texts.
inline constexpr std::size_t kMaxTextBytes = 1024;

enum class Encoding { Binary, Json };

// ---- worker -> coordinator ----

/// Opens a session, or changes the queues of an open one. Under CURVE the organization comes from
/// the authenticated key and org_id is ignored; in plaintext development mode it is taken from
/// here.
struct Hello {
    std::uint64_t req = 0;    ///< request id, echoed in the reply
    std::string worker_id;    ///< stable reviewer identity, 1..128 printable bytes
    std::int64_t org_id = 0;  ///< plaintext mode only
    /// Since protocol 1.1, optional: the queues this worker serves (its skills), at most
    /// kMaxQueues valid queue names; absent or empty means "default" only.
    std::vector<std::string> queues{};
    /// Since protocol 1.2, optional: the features of 1.2 and later this worker would use (e.g.
    /// kFeatureCompleteClaim), at most kMaxFeatures names. WELCOME answers with the ones the
    /// coordinator grants, so a coordinator never sends a new member to a worker that did not ask.
    std::vector<std::string> features{};
    template <class A>
    void serialize(A& ar);
    bool operator==(const Hello&) const = default;
};

/// Asks for up to max_jobs jobs; waits up to wait_ms for work to arrive before NO_WORK.
struct Claim {
    std::uint64_t req = 0;
    std::int32_t max_jobs = 1;  ///< 1..100
    std::int32_t wait_ms = 0;   ///< 0..60000 long-poll budget
    template <class A>
    void serialize(A& ar);
    bool operator==(const Claim&) const = default;
};

/// One more job a RENEW renews (protocol 1.3, RENEW's `held`): answered LEASE or REVOKED with its
/// own request id, exactly as a RENEW {req, job_id, generation} of its own would be.
struct HeldRenewal {
    std::uint64_t req = 0;
    std::int64_t job_id = 0;
    std::int64_t generation = 0;
    template <class A>
    void serialize(A& ar);
    bool operator==(const HeldRenewal&) const = default;
};

/// Heartbeat for one held job: extend its lease.
struct Renew {
    std::uint64_t req = 0;
    std::int64_t job_id = 0;
    std::int64_t generation = 0;
    /// Since protocol 1.3 (feature kFeatureRenewHeld), optional: the worker's other held jobs,
    /// at most kMaxHeldRenewals - 1, each with a request id of its own. The coordinator renews
    /// this RENEW's job and these in one statement and answers each one on its own.
    std::vector<HeldRenewal> held{};
    template <class A>
    void serialize(A& ar);
    bool operator==(const Renew&) const = default;
};

struct Complete {
    std::uint64_t req = 0;
    std::int64_t job_id = 0;
    std::int64_t generation = 0;
    std::string result_ref;  ///< 1..1024 bytes: where the review's result lives
    /// Since protocol 1.2 (feature kFeatureCompleteClaim), optional: at most one CLAIM, with a
    /// request id of its own, that the coordinator runs right after this completion (in the same
    /// transaction where it can); its ASSIGNED or NO_WORK follows this COMPLETE's answer.
    std::vector<Claim> next{};
    template <class A>
    void serialize(A& ar);
    bool operator==(const Complete&) const = default;
};

struct Fail {
    std::uint64_t req = 0;
    std::int64_t job_id = 0;
    std::int64_t generation = 0;
    std::string reason;      ///< 0..1024 bytes
    bool retryable = false;  ///< true: return to pending if attempts remain
    template <class A>
    void serialize(A& ar);
    bool operator==(const Fail&) const = default;
};

/// Gives a held job back without using up an attempt.
struct Release {
    std::uint64_t req = 0;
    std::int64_t job_id = 0;
    std::int64_t generation = 0;
    template <class A>
    void serialize(A& ar);
    bool operator==(const Release&) const = default;
};

/// Protocol 1.5 (feature kFeatureProgress): how far the holder of a job is. Stored only while
/// the generation holds a live lease, and answered ACCEPTED (state "assigned") or, refused like a
/// completion of the same generation would be, REJECTED. It does not extend the lease.
struct Progress {
    std::uint64_t req = 0;
    std::int64_t job_id = 0;
    std::int64_t generation = 0;
    std::int32_t percent = 0;  ///< 0..100
    std::string note;          ///< 0..200 bytes of UTF-8
    /// 0..4096 bytes of UTF-8 (base64 for binary state): what the next holder resumes from. Empty
    /// keeps the checkpoint stored last; a non-empty one replaces it.
    std::string checkpoint;
    template <class A>
    void serialize(A& ar);
    bool operator==(const Progress&) const = default;
};

/// Protocol 1.6 (feature kFeaturePark): the holder of a live lease hands the job to an outside
/// system. Answered PARKED (the job waits, parked, for the callback until timeout_ms from the
/// coordinator's now), or REJECTED as a completion of the same generation would be. The lease
/// ends: the holder stops renewing the job and forgets it.
struct Park {
    std::uint64_t req = 0;
    std::int64_t job_id = 0;
    std::int64_t generation = 0;
    std::int64_t timeout_ms = 0;  ///< 1 .. kMaxParkTimeoutMs
    std::string note;             ///< 0..200 bytes of UTF-8, for operators
    template <class A>
    void serialize(A& ar);
    bool operator==(const Park&) const = default;
};

/// Ends the session; held leases are left to expire (or released first by the worker).
struct Bye {
    std::uint64_t req = 0;
    template <class A>
    void serialize(A& ar);
    bool operator==(const Bye&) const = default;
};

// ---- coordinator -> worker ----

struct Welcome {
    std::uint64_t req = 0;
    std::int64_t org_id = 0;           ///< the organization the session acts for
    std::int32_t lease_ms = 0;         ///< length of every granted lease
    std::int32_t heartbeat_ms = 0;     ///< how often to renew each held job
    std::uint32_t max_body_bytes = 0;  ///< largest body the coordinator accepts
    /// Since protocol 1.2, optional: the features HELLO asked for that this coordinator grants;
    /// sent only to a HELLO that named some.
    std::vector<std::string> features{};
    /// Since protocol 1.4 (feature kFeatureReconnectHints), optional: the sessions this
    /// coordinator has open, this one included; what a worker sizes its reconnection window by.
    std::optional<std::int64_t> sessions{};
    template <class A>
    void serialize(A& ar);
    bool operator==(const Welcome&) const = default;
};

struct AssignedJob {
    std::int64_t job_id = 0;
    std::int64_t generation = 0;  ///< fencing token: quote it on RENEW/COMPLETE/FAIL/RELEASE
    std::int64_t lease_expires_at_us = 0;  ///< coordinator clock, microseconds since the epoch
    std::int32_t lease_ms = 0;             ///< lease length; workers should trust this, not clocks
    std::int32_t attempts = 0;             ///< this claim is attempt number `attempts`
    std::int32_t priority = 0;
    std::string payload;
    template <class A>
    void serialize(A& ar);
    bool operator==(const AssignedJob&) const = default;
};

/// The last progress an earlier holder of an assigned job reported (protocol 1.5, ASSIGNED's
/// `resume`): where to resume from.
struct ResumeFrom {
    std::int64_t job_id = 0;
    std::int64_t generation = 0;  ///< the generation that wrote it, an earlier one than the job's
    std::int32_t percent = 0;
    std::string note;
    std::string checkpoint;
    template <class A>
    void serialize(A& ar);
    bool operator==(const ResumeFrom&) const = default;
};

struct Assigned {
    std::uint64_t req = 0;
    std::vector<AssignedJob> jobs;  ///< at least one
    /// Since protocol 1.5 (feature kFeatureProgress), optional: for each job of `jobs` that an
    /// earlier holder reported progress on, that progress; sent only to a worker granted it.
    std::vector<ResumeFrom> resume{};
    template <class A>
    void serialize(A& ar);
    bool operator==(const Assigned&) const = default;
};

struct NoWork {
    std::uint64_t req = 0;
    std::string reason;  ///< "no pending jobs", "wait ended", "draining", ...
    template <class A>
    void serialize(A& ar);
    bool operator==(const NoWork&) const = default;
};

/// Answer to RENEW: the lease now ends at lease_expires_at_us.
struct LeaseMsg {
    std::uint64_t req = 0;
    std::int64_t job_id = 0;
    std::int64_t generation = 0;
    std::int64_t lease_expires_at_us = 0;
    std::int32_t lease_ms = 0;
    template <class A>
    void serialize(A& ar);
    bool operator==(const LeaseMsg&) const = default;
};

/// The worker lost the job (renewal refused, or the reaper took it back): stop working on it.
/// req is 0 when pushed unprompted.
struct Revoked {
    std::uint64_t req = 0;
    std::int64_t job_id = 0;
    std::int64_t generation = 0;
    std::string reason;  ///< a Rejection name, or "reclaimed"
    std::string detail;
    template <class A>
    void serialize(A& ar);
    bool operator==(const Revoked&) const = default;
};

/// COMPLETE, FAIL or RELEASE was committed.
struct Accepted {
    std::uint64_t req = 0;
    std::int64_t job_id = 0;
    std::int64_t generation = 0;
    std::string state;      ///< the job's state afterwards
    bool replayed = false;  ///< it had already been committed; nothing changed now
    template <class A>
    void serialize(A& ar);
    bool operator==(const Accepted&) const = default;
};

/// COMPLETE, FAIL or RELEASE was refused and changed nothing.
struct Rejected {
    std::uint64_t req = 0;
    std::int64_t job_id = 0;
    std::int64_t generation = 0;
    std::string reason;  ///< a Rejection name, e.g. "stale_generation"
    std::string detail;
    template <class A>
    void serialize(A& ar);
    bool operator==(const Rejected&) const = default;
};

/// What was wrong with a request. The request had no effect unless code says "outcome_unknown".
struct Error {
    std::uint64_t req = 0;  ///< 0 when the request could not be decoded
    std::string code;       ///< see docs/protocol.md: malformed, oversized, ...
    std::string text;
    /// Since protocol 1.4 (feature kFeatureReconnectHints), optional, on `draining` and
    /// `overloaded`: the least time to wait before sending the request (or HELLO) again.
    std::optional<std::int32_t> retry_after_ms{};
    template <class A>
    void serialize(A& ar);
    bool operator==(const Error&) const = default;
};

/// Answer to PARK (protocol 1.6): the job is parked. `token` finishes it, once, before
/// deadline_us; only its hash is stored, so it cannot be asked for again (a PARK re-sent before
/// the deadline parks the job again under a new token, and the old one stops working).
struct Parked {
    std::uint64_t req = 0;
    std::int64_t job_id = 0;
    std::int64_t generation = 0;
    std::string token;             ///< kParkTokenChars lowercase hex digits
    std::int64_t deadline_us = 0;  ///< microseconds since the epoch, the coordinator's clock
    template <class A>
    void serialize(A& ar);
    bool operator==(const Parked&) const = default;
};

/// PROGRESS (protocol 1.5) and PARK (1.6) are requests like HELLO .. BYE, but come after the
/// others with PARKED, so that the index of every earlier alternative (which the fuzz corpus
/// records) stays what it was.
using Message =
    std::variant<Hello, Claim, Renew, Complete, Fail, Release, Bye, Welcome, Assigned, NoWork,
                 LeaseMsg, Revoked, Accepted, Rejected, Error, Progress, Park, Parked>;

/// The type frame's text for a message, e.g. "CLAIM", "LEASE".
std::string_view type_name(const Message& m);
/// The request id carried by any message.
std::uint64_t request_id(const Message& m);
/// True for the worker -> coordinator messages (HELLO .. BYE, PROGRESS, PARK); a coordinator
/// refuses the others.
bool is_request(const Message& m);

/// The three frames of a message.
struct Frames {
    std::string tag;
    std::string type;
    std::string body;
};

Frames encode(const Message& m, Encoding enc);

// serialize() is defined in common/proto/protocol_serialize.hpp, for any archive. cereal's
// PortableBinaryInputArchive trusts length prefixes: use decode() for anything from a peer.

struct DecodeError {
    std::string
        code;  ///< malformed | oversized | wrong_version | unknown_type | undecodable | invalid
    std::string text;                            ///< says exactly what was wrong
    Encoding reply_encoding = Encoding::Binary;  ///< the encoding to answer in, when known
    std::uint64_t req = 0;  ///< the request id when the body was readable that far, else 0
};

struct Decoded {
    Encoding encoding = Encoding::Binary;
    Message message;
};

struct DecodeLimits {
    /// Largest request body (HELLO .. BYE) accepted; larger ones are refused "oversized".
    std::size_t max_request_body_bytes = kMaxBodyBytes;
    /// How many frames the message had, when the caller kept only the first few (0: all kept).
    std::size_t frame_count = 0;
};

/// Decodes the frames after the routing identity. Never throws and never allocates more than a
/// small multiple of the input size: untrusted length prefixes are checked against the input.
/// Field ranges (worker_id length, max_jobs, wait_ms, string sizes) are validated too.
/// Request bodies are limited to limits.max_request_body_bytes; coordinator -> worker bodies
/// (ASSIGNED carries payloads) to kMaxTransportBytes. Checks run in the order docs/protocol.md
/// gives: frame count, tag, type, size, body, field ranges; the first failing one answers.
std::variant<Decoded, DecodeError> decode(const std::vector<std::string_view>& frames,
                                          const DecodeLimits& limits = {});

/// Peer bytes made fit to quote in an error text: valid UTF-8 without control characters. A byte
/// that does not belong to a valid UTF-8 character, or a control character, is written as \xHH;
/// a result longer than max_bytes is cut at a character boundary and ends in "...".
std::string quote_peer_bytes(std::string_view bytes, std::size_t max_bytes = 64);

/// A text made valid UTF-8 within max_bytes: invalid bytes are written as \xHH, and a long text
/// is cut at a character boundary. Every string the coordinator sends passes through here or is
/// one of its own constants.
std::string valid_utf8_text(std::string_view text, std::size_t max_bytes = kMaxTextBytes);

}  // namespace aclaim::proto
