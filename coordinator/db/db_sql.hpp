#pragma once

// The DB layer's own statements beside the store's (common/store/*_sql.hpp) and the presence
// ones (presence_sql.hpp).

namespace aclaim::coordinator::sql {

/// True while the listener's server is a writable primary: a standby's or a fenced primary's
/// session hears no notification the new primary sends.
inline constexpr const char* kListenerWritable =
    "SELECT NOT pg_is_in_recovery() AND current_setting('transaction_read_only') = 'off'";

}  // namespace aclaim::coordinator::sql
