#pragma once

// Reads a coordinator's /metrics the way Prometheus does, for tests that check a counter moved.

#include <httplib.h>

#include <catch2/catch.hpp>
#include <map>
#include <sstream>
#include <string>

namespace aclaim::testing {

/// Every series of the /metrics page on 127.0.0.1:`port`, by its name and labels.
inline std::map<std::string, double> scrape_metrics(int port) {
    httplib::Client client("127.0.0.1", port);
    auto res = client.Get("/metrics");
    REQUIRE(res);
    REQUIRE(res->status == 200);
    std::map<std::string, double> out;
    std::istringstream lines(res->body);
    for (std::string line; std::getline(lines, line);) {
        if (line.empty() || line[0] == '#') continue;
        const auto space = line.rfind(' ');
        REQUIRE(space != std::string::npos);
        out[line.substr(0, space)] = std::stod(line.substr(space + 1));
    }
    return out;
}

}  // namespace aclaim::testing
