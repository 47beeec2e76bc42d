#pragma once

// Priority aging (schema/baseline/tables.sql): the pending jobs of a queue aged every S seconds
// have their priority raised by one per S waited, up to the highest pending priority of their
// organization, by a periodic pass (coordinator/db/ager.hpp) rather than in the claim, so that
// the claim stays one index scan of jobs_claim_order. One coordinator at a time runs the pass.

#include <cstdint>
#include <pqxx/pqxx>

#include "common/base/clock.hpp"

namespace aclaim::coordinator {

/// What one aging pass did.
struct AgingPass {
    bool held = false;        ///< this connection held the aging lock (another pass ran if not)
    std::int64_t raised = 0;  ///< jobs whose priority it raised
    bool more = false;        ///< a queue is still behind (a batch, or a long gap since the last)
};

/// The aging pass on a connection of the caller's (the coordinator's own role may run it).
class AgingStore {
  public:
    explicit AgingStore(pqxx::connection& conn) : conn_(conn) {}

    /// One transaction at `now`: under the aging lock, taken with a try so that one coordinator
    /// ages while the others pass. A queue catching up raises at most `batch` jobs a pass; one
    /// caught up raises the jobs that crossed a step since the last pass, at most 60 s of them.
    AgingPass run(base::Instant now, int batch);

  private:
    pqxx::connection& conn_;
};

}  // namespace aclaim::coordinator
