#include "tests/support/pg_server.hpp"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <pqxx/pqxx>
#include <sstream>

#include "common/store/migrations.hpp"

namespace aclaim::testing {

std::string command_output(const std::string& command) {
    std::string out;
    FILE* p = ::popen(command.c_str(), "r");
    REQUIRE(p);
    char buf[512];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    REQUIRE(::pclose(p) == 0);
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
}

ThrowawayServer::ThrowawayServer(ServerOptions options) {
    char tmpl[] = "/tmp/aclaim-test-pg.XXXXXX";
    REQUIRE(::mkdtemp(tmpl));
    dir_ = tmpl;
    dsn_ = command_output(std::string(ACLAIM_SOURCE_DIR) + "/compose/pgtmp start " + dir_ +
                          (options.durable ? "" : " --fast"));
    std::ifstream(dir_ + "/port") >> port_;
    REQUIRE(port_ > 0);
    if (options.migrate) {
        pqxx::connection conn(dsn_);
        store::migrate(conn);
    }
}

void ThrowawayServer::restart() {
    command_output(std::string(ACLAIM_SOURCE_DIR) + "/compose/pgtmp restart " + dir_);
}

ThrowawayServer::~ThrowawayServer() {
    stop();
}

void ThrowawayServer::stop() {
    if (dir_.empty()) return;
    std::system((std::string(ACLAIM_SOURCE_DIR) + "/compose/pgtmp stop " + dir_).c_str());
    dir_.clear();
}

std::vector<pid_t> ThrowawayServer::processes() const {
    std::ifstream in(dir_ + "/data/postmaster.pid");
    pid_t postmaster = 0;
    in >> postmaster;
    std::vector<pid_t> out{postmaster};
    for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
        const auto name = entry.path().filename().string();
        if (name.find_first_not_of("0123456789") != std::string::npos) continue;
        std::ifstream stat(entry.path() / "stat");
        std::string line;
        std::getline(stat, line);
        // "pid (comm) state ppid ...": the command may hold spaces, so read after the last ')'.
        const auto close = line.rfind(')');
        if (close == std::string::npos || close + 2 > line.size()) continue;
        std::istringstream rest(line.substr(close + 2));
        char state = 0;
        pid_t ppid = 0;
        rest >> state >> ppid;
        if (ppid == postmaster) out.push_back(static_cast<pid_t>(std::stol(name)));
    }
    return out;
}

}  // namespace aclaim::testing
