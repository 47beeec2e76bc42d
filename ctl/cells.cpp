#include "ctl/cells.hpp"

#include <condition_variable>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/base/enum_names.hpp"
#include "ctl/terminal.hpp"

namespace aclaim::ctl {

namespace {

/// libpq's own bound on a connection attempt to a server that accepts TCP and says nothing,
/// unless the operator set PGCONNECT_TIMEOUT or connect_timeout.
constexpr const char* kConnectTimeoutSeconds = "10";

enum class Verdict { Ok, Findings, Down };

constexpr base::EnumNames<Verdict, 3> kVerdictNames{{"ok", "findings", "down"}};
static_assert(kVerdictNames.covers(Verdict::Down));

std::string_view to_string(Verdict v) {
    return kVerdictNames(v);
}

/// One cell's thread and what it left; shared with the thread, which may outlive the wait.
struct Slot {
    std::mutex mutex;
    std::condition_variable done_cv;
    bool done = false;
    Verdict verdict = Verdict::Down;
    CellReport report;
    std::string error;
};

void run_one(const base::Cell& cell, const CellCommand& command, Slot& slot) {
    CellReport report;
    std::string error;
    Verdict verdict = Verdict::Down;
    try {
        pqxx::connection conn(cell.dsn);
        report = command(cell, conn);
        verdict = report.findings ? Verdict::Findings : Verdict::Ok;
    } catch (const pqxx::broken_connection& e) {
        error = std::string("unreachable: ") + e.what();
    } catch (const std::exception& e) {
        error = std::string("failed: ") + e.what();
    }
    // libpq's messages run over several lines; a cell's verdict is one.
    std::string line;
    for (const char c : error) {
        const bool space = c == '\n' || c == '\t' || c == ' ';
        if (!space) {
            line += c;
        } else if (!line.empty() && line.back() != ' ') {
            line += ' ';
        }
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    error = std::move(line);
    const std::lock_guard lock(slot.mutex);
    slot.verdict = verdict;
    slot.report = std::move(report);
    slot.error = std::move(error);
    slot.done = true;
    slot.done_cv.notify_all();
}

}  // namespace

std::optional<base::CellMap> load_cells(const Global& global) {
    if (global.cells.empty()) return std::nullopt;
    try {
        return base::CellMap::load(global.cells);
    } catch (const base::CellMapError& e) {
        throw UsageError(e.what());
    }
}

std::vector<base::Cell> target_cells(const base::CellMap& map, std::optional<store::OrgId> org) {
    if (!org) return map.cells();
    try {
        return {map.require_cell_of(*org)};
    } catch (const base::CellMapError& e) {
        throw UsageError(e.what());
    }
}

std::vector<std::string> misplaced_organizations(const base::CellMap& map, const base::Cell& cell,
                                                 const std::set<store::OrgId>& seen) {
    std::vector<std::string> out;
    for (const auto org : seen) {
        if (cell.holds(org)) continue;
        const auto* home = map.cell_of(org);
        out.push_back("organization " + std::to_string(org) + " has rows in cell '" + cell.name +
                      "' but the map puts it " +
                      (home ? "in cell '" + home->name + "'" : std::string("in no cell")));
    }
    return out;
}

int run_across_cells(const Global& global, const base::CellMap& map,
                     const std::vector<base::Cell>& cells, const CellCommand& command, bool json) {
    const auto timeout = parse_duration(global.cell_timeout);
    if (!timeout || *timeout < std::chrono::seconds(1))
        throw UsageError("--cell-timeout '" + global.cell_timeout +
                         "' must be a duration of at least 1s");
    ::setenv("PGCONNECT_TIMEOUT", kConnectTimeoutSeconds, 0);

    std::vector<std::shared_ptr<Slot>> slots;
    std::vector<std::thread> threads;
    for (const auto& cell : cells) {
        auto slot = std::make_shared<Slot>();
        slots.push_back(slot);
        // The thread owns copies of what it uses: it may outlive this call.
        threads.emplace_back([cell, command, slot] { run_one(cell, command, *slot); });
    }
    const auto deadline = global.clock.monotonic_now() + *timeout;
    bool abandoned = false;
    for (std::size_t i = 0; i < cells.size(); ++i) {
        auto& slot = *slots[i];
        std::unique_lock lock(slot.mutex);
        const auto left = deadline - global.clock.monotonic_now();
        if (slot.done_cv.wait_for(lock, left, [&] { return slot.done; })) {
            lock.unlock();
            threads[i].join();
            continue;
        }
        // A server that hangs (frozen, or behind a route that stopped forwarding) keeps TCP up,
        // so nothing on the connection would ever end the wait.
        slot.verdict = Verdict::Down;
        slot.error = "no answer within " + global.cell_timeout +
                     " (the server may be frozen or its route dead)";
        lock.unlock();
        threads[i].detach();
        abandoned = true;
    }

    int ok = 0, with_findings = 0, down = 0;
    nlohmann::json out{{"cells", nlohmann::json::array()}};
    for (std::size_t i = 0; i < cells.size(); ++i) {
        auto& slot = *slots[i];
        const std::lock_guard lock(slot.mutex);
        const auto misplaced = misplaced_organizations(map, cells[i], slot.report.organizations);
        if (slot.verdict == Verdict::Ok && !misplaced.empty()) slot.verdict = Verdict::Findings;
        const auto verdict = slot.verdict;
        (verdict == Verdict::Ok ? ok : verdict == Verdict::Findings ? with_findings : down) += 1;
        if (json) {
            nlohmann::json c{{"name", cells[i].name}, {"verdict", to_string(verdict)}};
            if (verdict == Verdict::Down) {
                c["error"] = slot.error;
            } else {
                c["report"] = nlohmann::json::parse(slot.report.json);
                c["report"]["misplaced"] = misplaced;
            }
            out["cells"].push_back(std::move(c));
        } else {
            std::cout << "== cell " << cells[i].name << ": " << to_string(verdict);
            if (verdict == Verdict::Down) std::cout << ": " << slot.error;
            std::cout << "\n";
            if (verdict != Verdict::Down) {
                std::cout << slot.report.text;
                for (const auto& m : misplaced) std::cout << "MISPLACED " << m << "\n";
            }
            std::cout << "\n";
        }
    }
    const int code = down > 0 ? 3 : with_findings > 0 ? 1 : 0;
    const std::string verdict = code == 0 ? "ok" : code == 1 ? "findings" : "cell down";
    if (json) {
        out["ok"] = code == 0;
        out["verdict"] = verdict;
        out["summary"] = {{"ok", ok}, {"findings", with_findings}, {"down", down}};
        std::cout << out.dump(2) << "\n";
    } else {
        std::cout << "cells: " << ok << " ok, " << with_findings << " with findings, " << down
                  << " down: " << (code == 0 ? "OK" : "NOT OK (" + verdict + ")") << "\n";
    }
    std::cout.flush();
    // A thread still waiting on a hung server cannot be stopped: end without it.
    if (abandoned) std::_Exit(code);
    return code;
}

TextBuffer::TextBuffer() : file_(::open_memstream(&data_, &size_)) {
    if (!file_) throw std::runtime_error("open_memstream failed");
}

TextBuffer::~TextBuffer() {
    if (file_) std::fclose(file_);
    std::free(data_);
}

std::string TextBuffer::text() {
    std::fflush(file_);
    return std::string(data_, size_);
}

}  // namespace aclaim::ctl
