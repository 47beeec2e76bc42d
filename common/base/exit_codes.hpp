#pragma once

// The exit-code policy of the operator's programs (aclaimctl, aclaim-console), written down in
// docs/operations.md ("Exit codes") so that a script can tell a refusal from a finding from an
// outage without reading the text. kExitUsage for a refused setting holds for every program
// (parse_command_line, run_program): a systemd unit stops on it instead of restarting.

namespace aclaim::base {

/// Everything asked was done (or the check found nothing).
inline constexpr int kExitOk = 0;
/// The command ran and found something: violations, a busy row.
inline constexpr int kExitFinding = 1;
/// A mistake in what was asked: a bad or missing argument, an unknown command, job or queue, a
/// job not in the state the command needs, nothing done of what was asked.
inline constexpr int kExitUsage = 2;
/// The database (or a cell of a cell map) could not be reached.
inline constexpr int kExitUnreachable = 3;

}  // namespace aclaim::base
