#pragma once

// What every SQL header of the product declares its statements as, apart from the statements
// themselves, so that a header of statements includes only this.

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace aclaim::common::sql {

/// One prepared statement: the name it is prepared under, its text and its parameter contract.
/// A text may hold {LOCK}, filled with the store's lock strategy when it is prepared.
struct Statement {
    const char* name;
    std::string text;
    /// $1, $2, ... in order, each "name type"; a unit test holds the text to this count.
    std::vector<std::string_view> params;
};

/// `text` with every occurrence of each key replaced by its value, the keys taken in order: the
/// one way a statement's text fills a placeholder.
inline std::string filled(
    std::string text,
    std::initializer_list<std::pair<std::string_view, std::string_view>> replacements) {
    for (const auto& [key, value] : replacements) {
        for (auto at = text.find(key); at != std::string::npos; at = text.find(key, at)) {
            text.replace(at, key.size(), value);
            at += value.size();
        }
    }
    return text;
}

}  // namespace aclaim::common::sql
