#pragma once

// The escapes of control characters that a log line (base::printable) and a JSON string write
// alike.

namespace aclaim::base {

/// The two-character escape of a newline, carriage return or tab (\n, \r, \t); nullptr for any
/// other character.
inline const char* short_escape(char c) {
    switch (c) {
        case '\n':
            return "\\n";
        case '\r':
            return "\\r";
        case '\t':
            return "\\t";
        default:
            return nullptr;
    }
}

}  // namespace aclaim::base
