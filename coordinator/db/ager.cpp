#include "coordinator/db/ager.hpp"

#include <spdlog/spdlog.h>

namespace aclaim::coordinator {

Ager::Ager(AgingOptions options, const Connections& connections, const base::Clock& clock)
    : WatchedService(options, "ager", "aclaim-coordinator-ager", "aging pending jobs again",
                     connections, clock) {}

AgingPass Ager::pass(pqxx::connection& conn) {
    const auto out = AgingStore(conn).run(clock_.now(), options_.batch);
    if (out.raised > 0) spdlog::debug("ager: {} pending jobs raised in priority", out.raised);
    return out;
}

}  // namespace aclaim::coordinator
