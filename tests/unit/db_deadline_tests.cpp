// The pieces that keep the coordinator answering while PostgreSQL hangs: the connection settings
// every coordinator connection gets, and the watchdog that cuts a connection past its deadline.

#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>

#include "common/base/clock.hpp"
#include "common/store/conninfo.hpp"
#include "coordinator/db/statement_watchdog.hpp"

using namespace aclaim;
using namespace aclaim::coordinator;
using namespace aclaim::base;
using namespace aclaim::store;
using namespace std::chrono_literals;

TEST_CASE("a connection setting is added in either DSN form unless the DSN names it",
          "[deadline]") {
    CHECK(with_setting("host=a,b port=1,2", "keepalives", "1") == "host=a,b port=1,2 keepalives=1");
    CHECK(with_setting("postgresql://h/db", "keepalives", "1") == "postgresql://h/db?keepalives=1");
    CHECK(with_setting("postgresql://h/db?sslmode=disable", "keepalives", "1") ==
          "postgresql://h/db?sslmode=disable&keepalives=1");
    // A longer key that begins with this one is not this one.
    CHECK(with_setting("host=h keepalives_idle=9", "keepalives", "1") ==
          "host=h keepalives_idle=9 keepalives=1");
    CHECK(with_setting("host=h keepalives = 0", "keepalives", "1") == "host=h keepalives = 0");
    CHECK(with_setting("postgresql://h/db?keepalives=0", "keepalives", "1") ==
          "postgresql://h/db?keepalives=0");
    CHECK(with_setting("", "connect_timeout", "2") == "connect_timeout=2");
    CHECK_FALSE(names_setting("postgresql://keepalives@h/db", "keepalives"));
}

TEST_CASE("every coordinator connection bounds its connect and watches its route", "[deadline]") {
    const std::string dsn = guarded_dsn("host=a,b port=5432,5433 target_session_attrs=read-write",
                                        std::chrono::milliseconds(2500));
    CHECK(names_setting(dsn, "target_session_attrs"));
    CHECK(dsn.find("connect_timeout=3") != std::string::npos);
    CHECK(dsn.find("keepalives=1") != std::string::npos);
    CHECK(names_setting(dsn, "keepalives_idle"));
    CHECK(names_setting(dsn, "keepalives_interval"));
    CHECK(names_setting(dsn, "keepalives_count"));
    CHECK(names_setting(dsn, "tcp_user_timeout"));
    // libpq reads a connect_timeout of 1 as 2; say what is meant.
    CHECK(guarded_dsn("host=h", 300ms).find("connect_timeout=2") != std::string::npos);
    // What the operator wrote wins.
    CHECK(guarded_dsn("host=h connect_timeout=30", 300ms).find("connect_timeout=2") ==
          std::string::npos);
    // Of several hosts only the writable primary will do, unless the operator said otherwise.
    CHECK(guarded_dsn("host=a,b", 300ms).find("target_session_attrs=read-write") !=
          std::string::npos);
    CHECK(guarded_dsn("host=a,b target_session_attrs=any", 300ms).find("read-write") ==
          std::string::npos);
}

namespace {

/// Both ends of a connected stream socket pair, closed at the end of the test.
struct SocketPair {
    SocketPair() { REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0); }
    ~SocketPair() {
        ::close(fds[0]);
        ::close(fds[1]);
    }
    /// True when the peer of fds[0] sees end of stream: the watchdog shut fds[0] down.
    bool peer_sees_eof() const {
        char c = 0;
        return ::recv(fds[1], &c, 1, MSG_DONTWAIT) == 0;
    }
    int fds[2] = {-1, -1};
};

}  // namespace

TEST_CASE("the watchdog cuts an armed connection once its deadline passes, and only then",
          "[deadline]") {
    base::ManualClock clock(base::instant_from_micros(1'000'000));
    StatementWatchdog watchdog(clock);
    auto watch = watchdog.watch("db-0");
    auto idle = watchdog.watch("db-1");
    SocketPair conn;
    SocketPair other;

    watch->arm(conn.fds[0], clock.monotonic_now() + 2s);
    CHECK(watchdog.sweep() == 0);
    clock.advance(base::Duration(1999ms));
    CHECK(watchdog.sweep() == 0);
    CHECK_FALSE(conn.peer_sees_eof());
    clock.advance(base::Duration(1ms));
    CHECK(watchdog.sweep() == 1);
    CHECK(conn.peer_sees_eof());
    // Cut once, reported once: to the owner when it disarms.
    CHECK(watchdog.sweep() == 0);
    CHECK(watchdog.cuts() == 1);
    CHECK(watch->disarm());
    CHECK_FALSE(watch->disarm());

    // A call that ends in time is never cut, however late the sweep comes.
    {
        ArmedWatch armed(*watch, other.fds[0], clock.monotonic_now() + 2s);
        CHECK_FALSE(armed.release());
    }
    clock.advance(base::Duration(10s));
    CHECK(watchdog.sweep() == 0);
    CHECK_FALSE(other.peer_sees_eof());
    CHECK(watchdog.cuts() == 1);
    // A slot that was never armed is never cut.
    CHECK_FALSE(idle->disarm());
}
