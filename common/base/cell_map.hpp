#pragma once

// The cell map: which cell (an HA PostgreSQL cluster and the coordinators that serve it) each
// organization lives in. aclaimctl reads it to run status, check and recover across cells, and a
// worker reads it to find its organization's coordinators. Format: docs/scaling.md#the-cell-map.

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace aclaim::base {

/// One cell: a database (one multi-host DSN naming its HA cluster) and its coordinators.
struct Cell {
    std::string name;
    std::string dsn;
    std::vector<std::string> coordinators;
    std::vector<std::int64_t> organizations;

    bool holds(std::int64_t org) const;
};

/// A map that cannot be used; the text says where and why.
class CellMapError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

class CellMap {
  public:
    /// Parses and validates a map; `source` names it in errors (a file name). Refuses unknown
    /// members, duplicate cell names, databases or coordinators, and an organization in two cells.
    static CellMap parse(std::string_view json, const std::string& source);
    /// Reads and parses a file.
    static CellMap load(const std::string& path);

    const std::vector<Cell>& cells() const { return cells_; }
    /// The cell an organization lives in, or nullptr when the map has none for it.
    const Cell* cell_of(std::int64_t org) const;
    /// The cell an organization lives in, or a CellMapError naming the map.
    const Cell& require_cell_of(std::int64_t org) const;
    const std::string& source() const { return source_; }

  private:
    std::vector<Cell> cells_;
    std::string source_;
};

}  // namespace aclaim::base
