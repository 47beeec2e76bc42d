#include "common/base/cell_map.hpp"

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "common/base/bounded_json.hpp"

namespace aclaim::base {

namespace {

using nlohmann::json;

constexpr std::size_t kMaxNameBytes = 64;

[[noreturn]] void refuse(const std::string& source, const std::string& what) {
    throw CellMapError("cell map " + source + ": " + what);
}

/// An object of the map and where it is, for the errors about it.
struct Object {
    const json& value;
    std::string where;  ///< "the map", "cells[0]"
    const std::string& source;
};

void only_members(const Object& o, std::initializer_list<std::string_view> allowed) {
    for (const auto& [key, value] : o.value.items()) {
        if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
            std::string what = o.where;
            what += " has an unknown member '";
            what += key;
            what += "'";
            refuse(o.source, what);
        }
    }
}

const json& member(const Object& o, const char* key) {
    const auto it = o.value.find(key);
    if (it == o.value.end()) refuse(o.source, o.where + " has no '" + key + "'");
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
    const Object cell_object{j, where, source};
    only_members(cell_object, {"name", "dsn", "coordinators", "organizations"});
    Cell cell;
    const auto& name = member(cell_object, "name");
    if (!name.is_string() || !valid_name(name.get<std::string>()))
        refuse(source, where + ".name must be 1..64 of A-Z a-z 0-9 - _ .");
    cell.name = name.get<std::string>();
    where = "cell '" + cell.name + "'";
    const auto& dsn = member(cell_object, "dsn");
    if (!dsn.is_string() || dsn.get<std::string>().empty())
        refuse(source, where + ": 'dsn' must be a non-empty string (a libpq conninfo or URI)");
    cell.dsn = dsn.get<std::string>();
    const auto& coordinators = member(cell_object, "coordinators");
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
    const auto& orgs = member(cell_object, "organizations");
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
        j = parse_bounded_json(text);
    } catch (const json::parse_error& e) {
        refuse(source, std::string("not JSON: ") + e.what());
    }
    if (!j.is_object()) refuse(source, "must be a JSON object with a 'cells' array");
    const Object top{j, "the map", source};
    only_members(top, {"version", "cells"});
    if (const auto v = j.find("version"); v != j.end() && *v != 1)
        refuse(source, "version " + v->dump() + " is not one this program reads (1)");
    const auto& cells = member(top, "cells");
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

}  // namespace aclaim::base
