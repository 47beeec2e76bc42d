#pragma once

// Helpers shared by the recover and quarantine commands.

#include <string>

#include "common/base/clock.hpp"

namespace aclaim::ctl {

/// Who acts, as recorded in the worker column of job_events: "aclaimctl:<login>".
std::string default_actor();

/// --now: empty means `clock`'s now; otherwise ISO 8601 with a zone or @unix_us.
base::Instant parse_now_option(const std::string& text, const base::Clock& clock);

}  // namespace aclaim::ctl
