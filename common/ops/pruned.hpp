#pragma once

// The prune ledger (job_prunes, schema/baseline/tables.sql) as the checker and recovery read it:
// which job ids retention removed, so that a pruned job counts as absent and never as lost.

#include <pqxx/pqxx>
#include <vector>

#include "common/store/assignment.hpp"

namespace aclaim::ops {

/// Job ids [first, last) of one organization that retention removed.
struct PrunedRange {
    store::OrgId org_id = 0;
    store::JobId first = 0;
    store::JobId last = 0;  ///< exclusive
};

/// The ledger's ranges, for "was this id pruned". Ranges never overlap: an id is deleted once.
class PrunedIds {
  public:
    PrunedIds() = default;
    explicit PrunedIds(std::vector<PrunedRange> ranges);
    bool contains(store::JobId id) const;
    /// Jobs the ledger records as removed.
    std::size_t count() const { return count_; }

  private:
    std::vector<PrunedRange> ranges_;  ///< by first id
    std::size_t count_ = 0;
};

/// Every range of the ledger, read in the caller's transaction (so in its snapshot).
std::vector<PrunedRange> load_pruned(pqxx::transaction_base& txn);

}  // namespace aclaim::ops
