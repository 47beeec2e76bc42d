#include "coordinator/http/prometheus.hpp"

namespace aclaim::coordinator {

namespace {

/// The families that describe the configuration instead of counting anything, declared where
/// the options are known.
struct Configuration {
    metrics::Registry registry;
    // Rendered in plaintext mode too (0), so that dashboards and alerts need no second shape.
    metrics::Single<metrics::Gauge> curve_enabled{
        registry,
        {"aclaim_auth_curve_enabled",
         "1 when workers must authenticate with a registered CURVE key, 0 in plaintext "
         "mode."}};
    metrics::Single<metrics::Gauge> db_threads{
        registry, {"aclaim_db_threads", "Database threads, one connection each."}};
};

}  // namespace

std::string render_prometheus(const Metrics& m, const HttpOptions& o) {
    Configuration c;
    c.curve_enabled = o.plaintext ? 0 : 1;
    c.db_threads = o.db_threads;
    return metrics::exposition(m.registry) + metrics::exposition(c.registry);
}

}  // namespace aclaim::coordinator
