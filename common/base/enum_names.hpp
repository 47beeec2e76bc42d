#pragma once

// The names an enumeration's values go by in logs, reports and on the command line, written once
// as a table: the name of a value and the value of a name are both read from it, so the two
// directions cannot disagree.

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

namespace aclaim::base {

/// The names of an enumeration whose values run 0, 1, 2, ... in declaration order, one each.
/// Pair it with `static_assert(kNames.covers(E::Last))` so that a value added at the end without
/// a name does not compile.
template <typename E, std::size_t N>
class EnumNames {
  public:
    constexpr explicit EnumNames(std::array<std::string_view, N> names) : names_(names) {}

    /// The value's name; "unknown" for a value outside the table.
    constexpr std::string_view operator()(E value) const {
        const auto i = static_cast<std::size_t>(value);
        return i < N ? names_[i] : std::string_view("unknown");
    }
    /// The value of that name, if the table has it.
    constexpr std::optional<E> parse(std::string_view name) const {
        for (std::size_t i = 0; i < N; ++i) {
            if (names_[i] == name) return static_cast<E>(i);
        }
        return std::nullopt;
    }
    /// Whether `last` is the table's last value, i.e. every value up to it has a name.
    constexpr bool covers(E last) const { return static_cast<std::size_t>(last) + 1 == N; }

  private:
    std::array<std::string_view, N> names_;
};

}  // namespace aclaim::base
