#include "coordinator/db/aging_store.hpp"

#include "coordinator/db/db_sql.hpp"

namespace aclaim::coordinator {

AgingPass AgingStore::run(base::Instant now, int batch) {
    AgingPass out;
    pqxx::work txn(conn_, "aging");
    out.held = txn.exec(sql::kAgingTryLock.text)[0][0].as<bool>();
    if (out.held) {
        const auto r = txn.exec_params1(sql::kAgeJobs.text, base::to_micros(now), batch);
        out.raised = r["raised"].as<std::int64_t>();
        out.more = r["more"].as<bool>();
    }
    txn.commit();
    return out;
}

}  // namespace aclaim::coordinator
