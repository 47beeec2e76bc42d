#pragma once

// Shared by the two halves of the client (client.cpp: socket, timers, reconnection;
// client_replies.cpp: what each reply means). Not part of the library's interface.

#include <algorithm>
#include <array>
#include <optional>
#include <string_view>
#include <utility>

#include "worker/client.hpp"

namespace aclaim::worker::detail {

/// The verdict-bearing requests: the only ones re-sent after their reply was lost, because the
/// coordinator answers a duplicate with ACCEPTED replayed=true or with the rejection.
inline std::optional<std::pair<Verdict::Op, JobRef>> terminal_op(const proto::Message& m) {
    if (const auto* c = std::get_if<proto::Complete>(&m))
        return std::pair{Verdict::Op::Complete, JobRef{c->job_id, c->generation}};
    if (const auto* f = std::get_if<proto::Fail>(&m))
        return std::pair{Verdict::Op::Fail, JobRef{f->job_id, f->generation}};
    if (const auto* r = std::get_if<proto::Release>(&m))
        return std::pair{Verdict::Op::Release, JobRef{r->job_id, r->generation}};
    return std::nullopt;
}

}  // namespace aclaim::worker::detail
