#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "common/base/enum_names.hpp"
#include "coordinator/metrics/histogram.hpp"

namespace aclaim::coordinator::metrics {

enum class Type { Counter, Gauge, Histogram };

class Family;

/// Every family of one set of metrics, in the order they were declared, which is the order of
/// the exposition text. A family registers itself when it is constructed; the registry keeps its
/// address, so it must not outlive its families (both are members of one struct: Metrics).
class Registry {
  public:
    Registry() = default;
    Registry(const Registry&) = delete;
    Registry& operator=(const Registry&) = delete;

    void add(const Family& family) { families_.push_back(&family); }
    const std::vector<const Family*>& families() const { return families_; }

  private:
    std::vector<const Family*> families_;
};

/// A counter series: a plain atomic, so that counting on the hot path stays one relaxed
/// fetch_add; the family only keeps its address for the scrape.
class Counter : public std::atomic<std::uint64_t> {
  public:
    Counter() : std::atomic<std::uint64_t>(0) {}
    /// One series of `family`, labelled `label_value` (empty for an unlabelled family).
    explicit Counter(Family& family, std::string_view label_value = {});
    using std::atomic<std::uint64_t>::operator=;
};

/// A gauge series; signed, for values such as -1 "not known yet".
class Gauge : public std::atomic<std::int64_t> {
  public:
    Gauge() : std::atomic<std::int64_t>(0) {}
    explicit Gauge(Family& family, std::string_view label_value = {});
    using std::atomic<std::int64_t>::operator=;
};

/// A histogram series.
class HistogramSeries : public Histogram {
  public:
    HistogramSeries() = default;
    explicit HistogramSeries(Family& family, std::string_view label_value = {});
};

template <class V>
constexpr Type kTypeOf = std::is_base_of_v<Histogram, V> ? Type::Histogram
                         : std::is_same_v<V, Gauge>      ? Type::Gauge
                                                         : Type::Counter;

/// What the exposition says of a family beside its type and samples.
struct Info {
    std::string_view name;
    std::string_view help;
    std::string_view label = {};  ///< the key of its one label; none when empty
};

/// One metric family as the exposition shows it: name, help, type, the key of its one label (none
/// when empty) and its series, each read from the atomics it names.
class Family {
  public:
    using Source = std::variant<const Counter*, const Gauge*, const Histogram*>;
    struct Series {
        std::string_view label_value;
        Source source;
    };

    Family(Registry& registry, Type type, const Info& info) : type_(type), info_(info) {
        registry.add(*this);
    }
    Family(const Family&) = delete;
    Family& operator=(const Family&) = delete;

    Type type() const { return type_; }
    std::string_view name() const { return info_.name; }
    std::string_view help() const { return info_.help; }
    std::string_view label_key() const { return info_.label; }
    const std::vector<Series>& series() const { return series_; }

    void add(std::string_view label_value, Source source) {
        series_.push_back({label_value, source});
    }

  private:
    Type type_;
    Info info_;
    std::vector<Series> series_;
};

inline Counter::Counter(Family& family, std::string_view label_value)
    : std::atomic<std::uint64_t>(0) {
    family.add(label_value, this);
}

inline Gauge::Gauge(Family& family, std::string_view label_value) : std::atomic<std::int64_t>(0) {
    family.add(label_value, this);
}

inline HistogramSeries::HistogramSeries(Family& family, std::string_view label_value) {
    family.add(label_value, static_cast<const Histogram*>(this));
}

namespace detail {
/// Holds the family of a one-series declaration, constructed before the series that joins it.
struct OwnFamily {
    Family family;
};
}  // namespace detail

/// An unlabelled family and its one series in one declaration:
///   Single<Counter> claims{registry, {"aclaim_claims_total", "CLAIMs answered with ASSIGNED."}};
/// reads and writes as the series itself (claims.fetch_add(1)).
template <class V>
class Single : private detail::OwnFamily, public V {
  public:
    Single(Registry& registry, const Info& info)
        : detail::OwnFamily{Family(registry, kTypeOf<V>, info)}, V(family) {}
    using V::operator=;
};

inline Family::Source source_of(const Counter& c) {
    return &c;
}
inline Family::Source source_of(const Gauge& g) {
    return &g;
}
inline Family::Source source_of(const Histogram& h) {
    return &h;
}

/// A family with one label and a fixed set of values, declared together with its series, which
/// are indexed as an array in the order of `label_values`:
///   Labelled<Counter, 2> passes{registry, {"aclaim_passes_total", "Passes.", "outcome"},
///                               {"run", "idle"}};
template <class V, std::size_t N>
class Labelled : private detail::OwnFamily {
  public:
    Labelled(Registry& registry, const Info& info,
             const std::array<std::string_view, N>& label_values)
        : detail::OwnFamily{Family(registry, kTypeOf<V>, info)} {
        for (std::size_t i = 0; i < N; ++i) family.add(label_values[i], source_of(values_[i]));
    }

    V& operator[](std::size_t i) { return values_[i]; }
    const V& operator[](std::size_t i) const { return values_[i]; }
    static constexpr std::size_t size() { return N; }
    V& front() { return values_.front(); }
    const V& front() const { return values_.front(); }
    V& back() { return values_.back(); }
    const V& back() const { return values_.back(); }
    auto begin() { return values_.begin(); }
    auto begin() const { return values_.begin(); }
    auto end() { return values_.end(); }
    auto end() const { return values_.end(); }

  private:
    std::array<V, N> values_{};
};

/// A Labelled family whose label values are the names of the enumeration E, and whose series are
/// indexed by E: each label is declared once, in E's names table, and referred to by its name.
///   Named<Counter, Outcome, 2> passes{registry, {"aclaim_passes_total", "Passes.", "outcome"},
///                                     kOutcomeNames};   passes[Outcome::Idle].fetch_add(1);
template <class V, class E, std::size_t N>
class Named : public Labelled<V, N> {
  public:
    Named(Registry& registry, const Info& info, const base::EnumNames<E, N>& names)
        : Labelled<V, N>(registry, info, labels(names)) {}

    V& operator[](E e) { return Labelled<V, N>::operator[](static_cast<std::size_t>(e)); }
    const V& operator[](E e) const {
        return Labelled<V, N>::operator[](static_cast<std::size_t>(e));
    }

  private:
    static std::array<std::string_view, N> labels(const base::EnumNames<E, N>& names) {
        std::array<std::string_view, N> out{};
        for (std::size_t i = 0; i < N; ++i) out[i] = names(static_cast<E>(i));
        return out;
    }
};

}  // namespace aclaim::coordinator::metrics
