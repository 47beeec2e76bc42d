#pragma once

#include <pqxx/pqxx>

#include "common/base/clock.hpp"
#include "coordinator/db/aging_store.hpp"
#include "coordinator/db/connections.hpp"
#include "coordinator/db/watched_pass.hpp"
#include "coordinator/options.hpp"

namespace aclaim::coordinator {

/// Raises the priority of the pending jobs of aged queues (schema/baseline/tables.sql) as they
/// wait, on a connection of its own. Every coordinator runs one; each pass is taken by whichever
/// gets the aging lock, the others pass (AgingStore::run). Off the claim and completion
/// path: with no aged queue a pass reads job_queues' aged rows, none. A pass that stopped at its
/// batch is followed by the next at once (WatchedPass). A pass not run is run at the next
/// interval, from the jobs' run_at: nothing is lost by waiting but the time waited, which the
/// aging bound counts (docs/guarantees.md).
class Ager final : public WatchedService<Ager, AgingOptions> {
  public:
    /// `connections` (and its watchdog) and `clock` must outlive it.
    Ager(AgingOptions options, const Connections& connections, const base::Clock& clock);
    ~Ager() { stop(); }

    /// One pass on `conn` at the clock's now: what the thread runs every interval. Public for
    /// tests.
    AgingPass pass(pqxx::connection& conn);
};

}  // namespace aclaim::coordinator
