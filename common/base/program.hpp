#pragma once

namespace aclaim::base {

/// The body of a program's main(): what it returns is the exit code.
using ProgramBody = int (*)(int argc, char** argv);

/// Runs `body` and turns an exception that escapes it into "NAME: what" on stderr and exit code 1,
/// so that every program dies the same way; a std::invalid_argument (a value the program refused,
/// such as an empty password) exits 2 instead, as every refused argument does (exit_codes.hpp). A
/// main() hands all of its work to it: declaring the command line can throw too (CLI11 refuses a
/// malformed option declaration).
int run_program(const char* name, ProgramBody body, int argc, char** argv);

}  // namespace aclaim::base
