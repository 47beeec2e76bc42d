#include "coordinator/db/ager.hpp"

#include <spdlog/spdlog.h>

namespace aclaim::coordinator {

Ager::Ager(AgingOptions options, const Connections& connections, const common::Clock& clock)
    : options_(options),
      clock_(clock),
      task_("ager", "aclaim-coordinator-ager", "aging pending jobs again", connections, clock) {}

common::AgingPass Ager::pass(pqxx::connection& conn) {
    const auto out = common::AgingStore(conn).run(clock_.now(), options_.batch);
    if (out.raised > 0) spdlog::debug("ager: {} pending jobs raised in priority", out.raised);
    return out;
}

void Ager::start() {
    // A pass not run is run at the next interval, from the jobs' run_at: nothing is lost by
    // waiting but the time waited, which the aging bound counts (docs/guarantees.md).
    task_.start(std::chrono::milliseconds(options_.interval_ms),
                [this](pqxx::connection& conn) { return pass(conn).more; });
}

}  // namespace aclaim::coordinator
