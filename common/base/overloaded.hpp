#pragma once

namespace aclaim::base {

/// Builds a std::visit visitor from lambdas.
template <class... F>
struct Overloaded : F... {
    using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

}  // namespace aclaim::base
