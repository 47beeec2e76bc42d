// CPU time of the processes a measurement involves, read from /proc at the edges of its window:
// the driver itself (the load generator), the coordinator and every PostgreSQL process. Every
// process shares the machine's cores, so a figure per job carries to other machines where a rate
// does not, and the machine's busy share says how much of the window other work took.

#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>

#include "drills/bench.d/bench.hpp"

namespace aclaim::drills {

namespace {

/// Fields 4 (ppid) and 14..17 (utime, stime, cutime, cstime, in ticks) of /proc/PID/stat; false
/// when the process is gone.
struct ProcStat {
    long ppid = 0;
    double own_ticks = 0;
    double children_ticks = 0;
};

bool read_stat(const std::string& pid, ProcStat& out) {
    std::ifstream f("/proc/" + pid + "/stat");
    std::string text;
    if (!std::getline(f, text)) return false;
    // The command name (field 2) is in parentheses and may hold spaces: read after the last ')'.
    const auto close = text.rfind(')');
    if (close == std::string::npos) return false;
    std::istringstream rest(text.substr(close + 2));
    std::string field;
    // Field 3 is the first after the name.
    for (int i = 3; i <= 17 && rest >> field; ++i) {
        if (i == 4) out.ppid = std::stol(field);
        if (i == 14 || i == 15) out.own_ticks += std::stod(field);
        if (i == 16 || i == 17) out.children_ticks += std::stod(field);
    }
    return true;
}

double ticks_to_us(double ticks) {
    return ticks * 1e6 / static_cast<double>(sysconf(_SC_CLK_TCK));
}

/// The coordinator's own time; the postmaster's with its reaped children and every live child.
double process_us(int pid) {
    ProcStat s;
    return pid > 0 && read_stat(std::to_string(pid), s) ? ticks_to_us(s.own_ticks) : 0;
}

double postgres_us(int postmaster) {
    if (postmaster <= 0) return 0;
    ProcStat master;
    if (!read_stat(std::to_string(postmaster), master)) return 0;
    double ticks = master.own_ticks + master.children_ticks;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
        const std::string name = entry.path().filename().string();
        if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
        ProcStat s;
        if (read_stat(name, s) && s.ppid == postmaster) ticks += s.own_ticks;
    }
    return ticks_to_us(ticks);
}

/// Busy and total jiffies of the whole machine (/proc/stat's first line).
std::pair<double, double> machine_ticks() {
    std::ifstream f("/proc/stat");
    std::string cpu;
    f >> cpu;
    double total = 0, idle = 0, v = 0;
    for (int i = 0; i < 8 && f >> v; ++i) {
        total += v;
        if (i == 3 || i == 4) idle += v;  // idle, iowait
    }
    return {total - idle, total};
}

}  // namespace

long proc_status_kb(int pid, const std::string& field) {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    const std::string key = field + ":";
    while (std::getline(status, line)) {
        if (line.rfind(key, 0) == 0) return std::stol(line.substr(key.size()));
    }
    throw std::runtime_error("no " + field + " for process " + std::to_string(pid));
}

CpuSample sample_cpu(const CpuPids& pids) {
    CpuSample s;
    s.at = BenchClock::now();
    rusage self{};
    getrusage(RUSAGE_SELF, &self);
    s.self_us = static_cast<double>(self.ru_utime.tv_sec + self.ru_stime.tv_sec) * 1e6 +
                static_cast<double>(self.ru_utime.tv_usec + self.ru_stime.tv_usec);
    s.coordinator_us = process_us(pids.coordinator);
    s.postgres_us = postgres_us(pids.postgres);
    std::tie(s.machine_busy, s.machine_total) = machine_ticks();
    return s;
}

nlohmann::json cpu_report(const CpuSample& a, const CpuSample& b, double units) {
    const double wall_us = std::chrono::duration<double, std::micro>(b.at - a.at).count();
    const double cores = std::max(1U, std::thread::hardware_concurrency());
    const double self = b.self_us - a.self_us;
    const double coordinator = b.coordinator_us - a.coordinator_us;
    const double postgres = b.postgres_us - a.postgres_us;
    const double total = b.machine_total - a.machine_total;
    const double busy = total > 0 ? (b.machine_busy - a.machine_busy) / total : 0;
    auto per = [&](double us) { return units > 0 ? us / units : 0.0; };
    nlohmann::json out;
    out["coordinator_us_per_job"] = per(coordinator);
    out["postgres_us_per_job"] = per(postgres);
    out["generator_us_per_job"] = per(self);
    // Of the machine's capacity over the window: how much each took, and how much went to
    // processes outside the measurement (other work on a shared machine).
    const double capacity = wall_us * cores;
    out["generator_share"] = capacity > 0 ? self / capacity : 0;
    out["coordinator_share"] = capacity > 0 ? coordinator / capacity : 0;
    out["postgres_share"] = capacity > 0 ? postgres / capacity : 0;
    out["machine_busy_share"] = busy;
    out["other_share"] =
        capacity > 0 ? std::max(0.0, busy - (self + coordinator + postgres) / capacity) : 0;
    out["cores"] = cores;
    return out;
}

}  // namespace aclaim::drills
