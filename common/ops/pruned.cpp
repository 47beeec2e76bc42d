#include "common/ops/pruned.hpp"

#include <algorithm>

#include "common/ops/checker_sql.hpp"

namespace aclaim::ops {

PrunedIds::PrunedIds(std::vector<PrunedRange> ranges) : ranges_(std::move(ranges)) {
    std::sort(ranges_.begin(), ranges_.end(),
              [](const PrunedRange& a, const PrunedRange& b) { return a.first < b.first; });
    for (const auto& r : ranges_) count_ += static_cast<std::size_t>(r.last - r.first);
}

bool PrunedIds::contains(store::JobId id) const {
    auto it = std::upper_bound(ranges_.begin(), ranges_.end(), id,
                               [](store::JobId v, const PrunedRange& r) { return v < r.first; });
    if (it == ranges_.begin()) return false;
    --it;
    return id < it->last;
}

std::vector<PrunedRange> load_pruned(pqxx::transaction_base& txn) {
    std::vector<PrunedRange> out;
    for (const auto& r : txn.exec(sql::kPrunedRanges)) {
        out.push_back({r["org_id"].as<store::OrgId>(), r["first"].as<store::JobId>(),
                       r["last"].as<store::JobId>()});
    }
    return out;
}

}  // namespace aclaim::ops
