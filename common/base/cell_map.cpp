#include "common/base/cell_map.hpp"

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace aclaim::common {

namespace {

using nlohmann::json;

constexpr std::size_t kMaxNameBytes = 64;

[[noreturn]] void refuse(const std::string& source, const std::string& what) {
    throw CellMapError("cell map " + source + ": " + what);
}

void only_members(const json& object, std::initializer_list<std::string_view> allowed,
                  const std::string& where, const std::string& source) {
    for (const auto& [key, value] : object.items()) {
        if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
            refuse(source, where + " has an unknown member '" + key + "'");
    }
}

const json& member(const json& object, const char* key, const std::string& where,
                   const std::string& source) {
    const auto it = object.find(key);
    if (it == object.end()) refuse(source, where + " has no '" + key + "'");
    return *it;
}

bool valid_name(const std::string& name) {
    if (name.empty() || name.size() > kMaxNameBytes) return false;
    return std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '-' || c == '_' || c == '.';
    });
}

Cell parse_cell(const json& j, std::size_t index, const std::string& source) {
    std::string where = "cells[" + std::to_string(index) + "]";
    if (!j.is_object()) refuse(source, where + " is not an object");
    only_members(j, {"name", "dsn", "coordinators", "organizations"}, where, source);
    Cell cell;
    const auto& name = member(j, "name", where, source);
    if (!name.is_string() || !valid_name(name.get<std::string>()))
        refuse(source, where + ".name must be 1..64 of A-Z a-z 0-9 - _ .");
    cell.name = name.get<std::string>();
    where = "cell '" + cell.name + "'";
    const auto& dsn = member(j, "dsn", where, source);
    if (!dsn.is_string() || dsn.get<std::string>().empty())
        refuse(source, where + ": 'dsn' must be a non-empty string (a libpq conninfo or URI)");
    cell.dsn = dsn.get<std::string>();
    const auto& coordinators = member(j, "coordinators", where, source);
    if (!coordinators.is_array() || coordinators.empty())
        refuse(source, where + ": 'coordinators' must be a non-empty array of endpoints");
    for (const auto& c : coordinators) {
        if (!c.is_string() || c.get<std::string>().find("://") == std::string::npos)
            refuse(source, where +
                               ": every coordinator must be an endpoint such as "
                               "tcp://host:5555, got " +
                               c.dump());
        cell.coordinators.push_back(c.get<std::string>());
    }
    const auto& orgs = member(j, "organizations", where, source);
    if (!orgs.is_array()) refuse(source, where + ": 'organizations' must be an array");
    for (const auto& o : orgs) {
        if (!o.is_number_integer() || o.get<std::int64_t>() < 1)
            refuse(source, where + ": every organization must be an integer >= 1, got " + o.dump());
        cell.organizations.push_back(o.get<std::int64_t>());
    }
    return cell;
}

}  // namespace

bool Cell::holds(std::int64_t org) const {
    return std::find(organizations.begin(), organizations.end(), org) != organizations.end();
}

CellMap CellMap::parse(std::string_view text, const std::string& source) {
    json j;
    try {
        j = json::parse(text.begin(), text.end());
    } catch (const json::parse_error& e) {
        refuse(source, std::string("not JSON: ") + e.what());
    }
    if (!j.is_object()) refuse(source, "must be a JSON object with a 'cells' array");
    only_members(j, {"version", "cells"}, "the map", source);
    if (const auto v = j.find("version"); v != j.end() && *v != 1)
        refuse(source, "version " + v->dump() + " is not one this program reads (1)");
    const auto& cells = member(j, "cells", "the map", source);
    if (!cells.is_array() || cells.empty()) refuse(source, "'cells' must be a non-empty array");

    CellMap map;
    map.source_ = source;
    std::map<std::string, std::string> dsn_owner;
    std::map<std::string, std::string> coordinator_owner;
    std::map<std::int64_t, std::string> org_owner;
    std::set<std::string> names;
    for (std::size_t i = 0; i < cells.size(); ++i) {
        auto cell = parse_cell(cells[i], i, source);
        if (!names.insert(cell.name).second)
            refuse(source, "two cells are named '" + cell.name + "'");
        // Two cells on one database would be one cell whose statements span the map.
        if (const auto [it, fresh] = dsn_owner.emplace(cell.dsn, cell.name); !fresh)
            refuse(source, "cells '" + it->second + "' and '" + cell.name + "' have the same dsn");
        for (const auto& c : cell.coordinators) {
            const auto [it, fresh] = coordinator_owner.emplace(c, cell.name);
            if (!fresh) {
                refuse(source, "coordinator " + c + " is listed " +
                                   (it->second == cell.name
                                        ? "twice in cell '" + cell.name + "'"
                                        : "in cells '" + it->second + "' and '" + cell.name + "'"));
            }
        }
        for (const auto org : cell.organizations) {
            const auto [it, fresh] = org_owner.emplace(org, cell.name);
            if (!fresh) {
                refuse(source, "organization " + std::to_string(org) + " is mapped " +
                                   (it->second == cell.name ? "twice in cell '" + cell.name + "'"
                                                            : "to two cells, '" + it->second +
                                                                  "' and '" + cell.name + "'") +
                                   "; an organization lives in exactly one cell");
            }
        }
        map.cells_.push_back(std::move(cell));
    }
    return map;
}

CellMap CellMap::load(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw CellMapError("cell map " + path + ": cannot be read");
    std::ostringstream text;
    text << in.rdbuf();
    return parse(text.str(), path);
}

const Cell* CellMap::cell_of(std::int64_t org) const {
    for (const auto& cell : cells_) {
        if (cell.holds(org)) return &cell;
    }
    return nullptr;
}

const Cell& CellMap::require_cell_of(std::int64_t org) const {
    const auto* cell = cell_of(org);
    if (!cell)
        throw CellMapError("cell map " + source_ + ": no cell holds organization " +
                           std::to_string(org));
    return *cell;
}

}  // namespace aclaim::common
