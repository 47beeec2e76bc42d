#pragma once

// Running status, check and recover across the cells of a cell map (--cells FILE): every cell's
// database is asked at once, each in a thread of its own with a deadline, and what each said is
// printed cell by cell with an overall verdict. A cell that cannot be reached or does not answer
// in time is reported as down, never left out.

#include <cstdio>
#include <functional>
#include <optional>
#include <pqxx/pqxx>
#include <set>
#include <string>
#include <vector>

#include "common/base/cell_map.hpp"
#include "common/base/clock.hpp"
#include "common/store/assignment.hpp"
#include "ctl/ctl.hpp"

namespace aclaim::ctl {

/// What a command found in one cell.
struct CellReport {
    bool findings = false;  ///< something an operator must look at (the command's exit code 1)
    std::string text;       ///< the command's report, as it prints it for one database
    std::string json;       ///< the same as one JSON object, serialized
    /// The organizations whose rows the command saw, to hold against the map.
    std::set<store::OrgId> organizations;
};

/// The command's work in one cell, on a connection to the cell's database.
using CellCommand = std::function<CellReport(const base::Cell&, pqxx::connection&)>;

/// The map --cells names, or nullopt when none was given; a UsageError when it cannot be used.
std::optional<base::CellMap> load_cells(const Global& global);

/// The cells a command runs in: every cell, or with an organization only the one that holds it.
std::vector<base::Cell> target_cells(const base::CellMap& map, std::optional<store::OrgId> org);

/// Findings for organizations whose rows are in `cell` but that the map places elsewhere or
/// nowhere: their work is invisible to their cell's coordinators.
std::vector<std::string> misplaced_organizations(const base::CellMap& map, const base::Cell& cell,
                                                 const std::set<store::OrgId>& seen);

/// Runs `command` in each of `cells` (of `map`) at once, waits at most --cell-timeout for each,
/// prints each cell's report, with a finding for each misplaced organization, and the verdict
/// (one JSON object when `json`), and returns the exit code: 0 when every cell answered without
/// findings, 1 when a cell had findings, 3 when a cell is down. A cell still not answering at
/// the deadline is abandoned: the process then ends as soon as the verdict is printed, without
/// waiting for its connection.
int run_across_cells(const Global& global, const base::CellMap& map,
                     const std::vector<base::Cell>& cells, const CellCommand& command, bool json);

/// A FILE* that writes into memory, for the report printers that take one.
class TextBuffer {
  public:
    TextBuffer();
    ~TextBuffer();
    TextBuffer(const TextBuffer&) = delete;
    TextBuffer& operator=(const TextBuffer&) = delete;
    std::FILE* file() { return file_; }
    /// Everything written so far.
    std::string text();

  private:
    char* data_ = nullptr;
    std::size_t size_ = 0;
    std::FILE* file_ = nullptr;
};

}  // namespace aclaim::ctl
