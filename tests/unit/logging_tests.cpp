// Log lines stay one line each: control characters a client put into a name or a path are
// escaped, by the helper and by the sink every program's logger writes through.

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <catch2/catch.hpp>
#include <sstream>

#include "common/base/logging.hpp"

using namespace aclaim;

TEST_CASE("printable: control characters escaped, length bounded", "[logging]") {
    CHECK(base::printable("alice") == "alice");
    CHECK(base::printable("a\nb\r\tc\x1b[2Kd\x7f") == "a\\nb\\r\\tc\\x1b[2Kd\\x7f");
    CHECK(base::printable(std::string("nul\0byte", 8)) == "nul\\x00byte");
    CHECK(base::printable("żółw") == "żółw");
    CHECK(base::printable(std::string(300, 'a'), 10) == "aaaaaaaaaa...(290 more bytes)");
}

TEST_CASE("escaping sink: one message is one line, whatever it quotes", "[logging]") {
    std::ostringstream out;
    auto logger = std::make_shared<spdlog::logger>(
        "test", base::escaping_sink(std::make_shared<spdlog::sinks::ostream_sink_st>(out)));
    logger->set_pattern("%l %v");
    logger->warn("console: failed sign-in as '{}'",
                 "mallory\n2031-01-01T00:00:00.000 info [aclaim-console] console: root signed in");
    logger->info("plain line");
    CHECK(out.str() ==
          "warning console: failed sign-in as 'mallory\\n2031-01-01T00:00:00.000 info "
          "[aclaim-console] console: root signed in'\ninfo plain line\n");
}
