#pragma once

// A PostgreSQL server of a test's own, apart from the shared test server, for tests that stop,
// freeze or fail over a server: compose/pgtmp with --fast, migrated, stopped with the object.

#include <sys/types.h>

#include <string>
#include <vector>

namespace aclaim::testing {

/// Runs a shell command and returns its standard output without trailing newlines; the test
/// fails when the command does.
std::string command_output(const std::string& command);

/// How a throwaway server starts.
struct ServerOptions {
    /// Durable commits (fsync on): an immediate restart of a server without them loses the last
    /// commits, which is a different drill.
    bool durable = false;
    /// Apply the embedded migrations to its database at start.
    bool migrate = true;
};

class ThrowawayServer {
  public:
    explicit ThrowawayServer(ServerOptions options = {});
    ~ThrowawayServer();
    ThrowawayServer(const ThrowawayServer&) = delete;
    ThrowawayServer& operator=(const ThrowawayServer&) = delete;

    /// The DSN of its database "aclaim", migrated.
    const std::string& dsn() const { return dsn_; }
    int port() const { return port_; }
    /// Its data folder (the postmaster's pid file and the server log are there).
    std::string data_dir() const { return dir_ + "/data"; }
    /// Stops the server and removes its folder (the destructor does it otherwise).
    void stop();
    /// An immediate restart on the same port: a crash and recovery, as an operator rehearses it.
    void restart();
    /// The postmaster and every process it started: SIGSTOP them all to freeze the server
    /// (TCP stays up), SIGCONT to thaw it.
    std::vector<pid_t> processes() const;

  private:
    std::string dir_;
    std::string dsn_;
    int port_ = 0;
};

}  // namespace aclaim::testing
