#pragma once

// What every SQL header of the product declares its statements as, apart from the statements
// themselves, so that a header of statements includes only this: the named statement, and the one
// way a statement's text is composed from parts.

#include <cstddef>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace aclaim::store::sql {

/// One prepared statement: the name it is prepared under, its text and its parameter contract.
struct Statement {
    const char* name;
    std::string text;
    /// $1, $2, ... in order, each "name type"; a unit test holds the text to this count.
    std::vector<std::string_view> params;
};

/// A named slot of a statement template, written `{NAME}` in the template (capital letters,
/// digits and '_'), and the text that fills it.
struct Slot {
    std::string_view name;
    std::string_view value;
};

/// `tmpl` with every `{NAME}` replaced by the value of the slot of that name; a value is taken as
/// it is, never searched for slots itself. The one way a statement's text is put together from
/// parts. A template that names a slot no argument fills, or an argument whose slot the template
/// never names, is a statement composed wrong: std::logic_error. Braces around anything else (an
/// array literal such as '{}' or '{default}') are text.
inline std::string compose(std::string_view tmpl, std::initializer_list<Slot> slots) {
    const auto slot_char = [](char c) {
        return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    };
    std::vector<bool> used(slots.size(), false);
    std::string out;
    out.reserve(tmpl.size());
    std::size_t from = 0;
    for (std::size_t open = tmpl.find('{'); open != std::string_view::npos;
         open = tmpl.find('{', open + 1)) {
        std::size_t close = open + 1;
        while (close < tmpl.size() && slot_char(tmpl[close])) ++close;
        if (close == open + 1 || close == tmpl.size() || tmpl[close] != '}' ||
            tmpl[open + 1] < 'A' || tmpl[open + 1] > 'Z') {
            continue;
        }
        const std::string_view name = tmpl.substr(open + 1, close - open - 1);
        std::size_t i = 0;
        for (const Slot& slot : slots) {
            if (slot.name == name) break;
            ++i;
        }
        if (i == slots.size()) {
            throw std::logic_error("statement slot {" + std::string(name) + "} is not filled");
        }
        used[i] = true;
        out.append(tmpl.substr(from, open - from));
        out.append(std::data(slots)[i].value);
        from = close + 1;
        open = close;
    }
    out.append(tmpl.substr(from));
    std::size_t i = 0;
    for (const Slot& slot : slots) {
        if (!used[i++]) {
            throw std::logic_error("the statement has no slot {" + std::string(slot.name) + "}");
        }
    }
    return out;
}

}  // namespace aclaim::store::sql
