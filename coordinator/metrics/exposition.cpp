#include "coordinator/metrics/exposition.hpp"

#include <array>
#include <cstdio>

namespace aclaim::coordinator::metrics {

namespace {

/// In Type order.
constexpr std::array<std::string_view, 3> kTypeNames{"counter", "gauge", "histogram"};

/// The bounds as Prometheus reads them: seconds, shortest form ("0.0001", "2.5", "+Inf").
std::string bucket_bound(std::size_t i) {
    if (i >= Histogram::kBoundsUs.size()) return "+Inf";
    std::array<char, 32> buf{};
    std::snprintf(buf.data(), buf.size(), "%g", static_cast<double>(Histogram::kBoundsUs[i]) / 1e6);
    return buf.data();
}

/// Builds the exposition text family by family.
class Writer {
  public:
    void family(const Family& f) {
        out_ += "# HELP ";
        out_ += f.name();
        out_ += ' ';
        out_ += f.help();
        out_ += "\n# TYPE ";
        out_ += f.name();
        out_ += ' ';
        out_ += kTypeNames[static_cast<std::size_t>(f.type())];
        out_ += '\n';
        for (const auto& s : f.series()) {
            const std::string labels =
                f.label_key().empty()
                    ? std::string()
                    : std::string(f.label_key()) + "=\"" + std::string(s.label_value) + "\"";
            std::visit([&](const auto* source) { series(f.name(), labels, *source); }, s.source);
        }
    }

    std::string take() { return std::move(out_); }

  private:
    void series(std::string_view name, const std::string& labels, const Counter& c) {
        sample(name, labels, std::to_string(c.load(std::memory_order_relaxed)));
    }

    void series(std::string_view name, const std::string& labels, const Gauge& g) {
        sample(name, labels, std::to_string(g.load(std::memory_order_relaxed)));
    }

    /// Cumulative buckets with the le label after the family's own, then sum and count.
    void series(std::string_view name, const std::string& labels, const Histogram& h) {
        const auto s = h.snapshot();
        const std::string bucket = std::string(name) + "_bucket";
        const std::string prefix = labels.empty() ? "" : labels + ",";
        std::uint64_t cumulative = 0;
        for (std::size_t i = 0; i < Histogram::kBuckets; ++i) {
            cumulative += s.buckets[i];
            sample(bucket, prefix + "le=\"" + bucket_bound(i) + "\"", std::to_string(cumulative));
        }
        std::array<char, 32> sum{};
        std::snprintf(sum.data(), sum.size(), "%.6f", static_cast<double>(s.sum_us) / 1e6);
        sample(std::string(name) + "_sum", labels, sum.data());
        sample(std::string(name) + "_count", labels, std::to_string(cumulative));
    }

    void sample(std::string_view name, const std::string& labels, std::string_view value) {
        out_ += name;
        if (!labels.empty()) {
            out_ += '{';
            out_ += labels;
            out_ += '}';
        }
        out_ += ' ';
        out_ += value;
        out_ += '\n';
    }

    std::string out_;
};

}  // namespace

std::string exposition(const Registry& registry) {
    Writer w;
    for (const Family* f : registry.families()) w.family(*f);
    return w.take();
}

}  // namespace aclaim::coordinator::metrics
