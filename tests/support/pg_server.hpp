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

class ThrowawayServer {
  public:
    ThrowawayServer();
    ~ThrowawayServer();
    ThrowawayServer(const ThrowawayServer&) = delete;
    ThrowawayServer& operator=(const ThrowawayServer&) = delete;

    /// The DSN of its database "aclaim", migrated.
    const std::string& dsn() const { return dsn_; }
    int port() const { return port_; }
    /// Stops the server and removes its folder (the destructor does it otherwise).
    void stop();
    /// The postmaster and every process it started: SIGSTOP them all to freeze the server
    /// (TCP stays up), SIGCONT to thaw it.
    std::vector<pid_t> processes() const;

  private:
    std::string dir_;
    std::string dsn_;
    int port_ = 0;
};

}  // namespace aclaim::testing
