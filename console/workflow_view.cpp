// The console's workflow view: a job's workflow (common/ops/workflow.hpp) for an operator.

#include "common/ops/workflow.hpp"
#include "common/store/store_sql.hpp"
#include "console/views.hpp"

namespace aclaim::console {

std::optional<nlohmann::json> Views::workflow(const Operator& op, store::JobId id) {
    return with_connections([&]() -> std::optional<nlohmann::json> {
        for (const auto& s : scopes_of(op)) {
            // Row-level security scopes the reads to `s`; the organization is passed as well, so
            // the walk stays in it even for an operator of every organization.
            scope(s);
            const auto org = s == store::sql::kAllOrganizations
                                 ? std::nullopt
                                 : std::optional<store::OrgId>(std::stoll(s));
            if (const auto w = ops::read_workflow(data(), id, org)) {
                return ops::workflow_json(*w);
            }
        }
        return std::nullopt;
    });
}

}  // namespace aclaim::console
