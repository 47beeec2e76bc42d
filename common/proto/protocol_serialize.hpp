#pragma once

// The field lists of every protocol message: the single place that names each field, in wire
// order, shared by every archive (cereal's, and the bounded readers in protocol.cpp). Include it
// to run other cereal archives over the structs; for bytes from a peer use proto::decode, because
// cereal's PortableBinaryInputArchive trusts length prefixes.

#include <cereal/cereal.hpp>
#include <cereal/types/string.hpp>
#include <cereal/types/vector.hpp>

#include "common/proto/protocol.hpp"

namespace aclaim::proto {

/// A member added to a message after protocol 1.0, which a peer may leave out: always last, and
/// written only when it is not empty, so that a message that does not use it is byte for byte
/// what a 1.0 peer sends and reads. The bounded readers (protocol.cpp, json_decode.cpp) read it
/// when it is present; any other archive reads only what was written. Where a message has several,
/// each is present exactly when bytes remain, so an empty one is still written when a later one
/// is (`later`): a binary reader would otherwise read the later member's bytes as this one.
/// A scalar member (protocol 1.4) is a std::optional, written only when it holds a value.
template <class A, class T>
void optional_member(A& ar, cereal::NameValuePair<T>&& field, bool later = false) {
    if constexpr (requires { ar.optional_member(std::move(field)); }) {
        ar.optional_member(std::move(field));
    } else if constexpr (requires { field.value.has_value(); }) {
        if (field.value.has_value()) ar(cereal::make_nvp(field.name, *field.value));
    } else if (!field.value.empty() || later) {
        ar(std::move(field));
    }
}

template <class A>
void Hello::serialize(A& ar) {
    ar(CEREAL_NVP(req), CEREAL_NVP(worker_id), CEREAL_NVP(org_id));
    optional_member(ar, CEREAL_NVP(queues), !features.empty());  // protocol 1.1
    optional_member(ar, CEREAL_NVP(features));                   // protocol 1.2
}
template <class A>
void Claim::serialize(A& ar) {
    ar(CEREAL_NVP(req), CEREAL_NVP(max_jobs), CEREAL_NVP(wait_ms));
}
template <class A>
void HeldRenewal::serialize(A& ar) {
    ar(CEREAL_NVP(req), CEREAL_NVP(job_id), CEREAL_NVP(generation));
}
template <class A>
void Renew::serialize(A& ar) {
    ar(CEREAL_NVP(req), CEREAL_NVP(job_id), CEREAL_NVP(generation));
    optional_member(ar, CEREAL_NVP(held));  // protocol 1.3
}
template <class A>
void Complete::serialize(A& ar) {
    ar(CEREAL_NVP(req), CEREAL_NVP(job_id), CEREAL_NVP(generation), CEREAL_NVP(result_ref));
    optional_member(ar, CEREAL_NVP(next));  // protocol 1.2
}
template <class A>
void Fail::serialize(A& ar) {
    ar(CEREAL_NVP(req), CEREAL_NVP(job_id), CEREAL_NVP(generation), CEREAL_NVP(reason),
       CEREAL_NVP(retryable));
}
template <class A>
void Release::serialize(A& ar) {
    ar(CEREAL_NVP(req), CEREAL_NVP(job_id), CEREAL_NVP(generation));
}
template <class A>
void Progress::serialize(A& ar) {
    ar(CEREAL_NVP(req), CEREAL_NVP(job_id), CEREAL_NVP(generation), CEREAL_NVP(percent),
       CEREAL_NVP(note), CEREAL_NVP(checkpoint));
}
template <class A>
void Park::serialize(A& ar) {
    ar(CEREAL_NVP(req), CEREAL_NVP(job_id), CEREAL_NVP(generation), CEREAL_NVP(timeout_ms),
       CEREAL_NVP(note));
}
template <class A>
void Parked::serialize(A& ar) {
    ar(CEREAL_NVP(req), CEREAL_NVP(job_id), CEREAL_NVP(generation), CEREAL_NVP(token),
       CEREAL_NVP(deadline_us));
}
template <class A>
void Bye::serialize(A& ar) {
    ar(CEREAL_NVP(req));
}
template <class A>
void Welcome::serialize(A& ar) {
    ar(CEREAL_NVP(req), CEREAL_NVP(org_id), CEREAL_NVP(lease_ms), CEREAL_NVP(heartbeat_ms),
       CEREAL_NVP(max_body_bytes));
    optional_member(ar, CEREAL_NVP(features), sessions.has_value());  // protocol 1.2
    optional_member(ar, CEREAL_NVP(sessions));                        // protocol 1.4
}
template <class A>
void AssignedJob::serialize(A& ar) {
    ar(CEREAL_NVP(job_id), CEREAL_NVP(generation), CEREAL_NVP(lease_expires_at_us),
       CEREAL_NVP(lease_ms), CEREAL_NVP(attempts), CEREAL_NVP(priority), CEREAL_NVP(payload));
}
template <class A>
void ResumeFrom::serialize(A& ar) {
    ar(CEREAL_NVP(job_id), CEREAL_NVP(generation), CEREAL_NVP(percent), CEREAL_NVP(note),
       CEREAL_NVP(checkpoint));
}
template <class A>
void Assigned::serialize(A& ar) {
    ar(CEREAL_NVP(req), CEREAL_NVP(jobs));
    optional_member(ar, CEREAL_NVP(resume));  // protocol 1.5
}
template <class A>
void NoWork::serialize(A& ar) {
    ar(CEREAL_NVP(req), CEREAL_NVP(reason));
}
template <class A>
void LeaseMsg::serialize(A& ar) {
    ar(CEREAL_NVP(req), CEREAL_NVP(job_id), CEREAL_NVP(generation), CEREAL_NVP(lease_expires_at_us),
       CEREAL_NVP(lease_ms));
}
template <class A>
void Revoked::serialize(A& ar) {
    ar(CEREAL_NVP(req), CEREAL_NVP(job_id), CEREAL_NVP(generation), CEREAL_NVP(reason),
       CEREAL_NVP(detail));
}
template <class A>
void Accepted::serialize(A& ar) {
    ar(CEREAL_NVP(req), CEREAL_NVP(job_id), CEREAL_NVP(generation), CEREAL_NVP(state),
       CEREAL_NVP(replayed));
}
template <class A>
void Rejected::serialize(A& ar) {
    ar(CEREAL_NVP(req), CEREAL_NVP(job_id), CEREAL_NVP(generation), CEREAL_NVP(reason),
       CEREAL_NVP(detail));
}
template <class A>
void Error::serialize(A& ar) {
    ar(CEREAL_NVP(req), CEREAL_NVP(code), CEREAL_NVP(text));
    optional_member(ar, CEREAL_NVP(retry_after_ms));  // protocol 1.4
}

}  // namespace aclaim::proto
