// aclaim-worker's command line: several coordinator endpoints, or its organization's from a cell
// map, the secret key from a file, and the refusals that name the flag.

#include <unistd.h>
#include <zmq.h>

#include <CLI/CLI.hpp>
#include <array>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "worker/options.hpp"

using aclaim::worker::parse_options_or_throw;
using aclaim::worker::WorkerOptions;

namespace {

WorkerOptions parse(std::vector<std::string> args) {
    args.insert(args.begin(), "aclaim-worker");
    std::vector<const char*> argv;
    for (const auto& a : args) argv.push_back(a.c_str());
    return parse_options_or_throw(static_cast<int>(argv.size()), argv.data());
}

std::string refusal(const std::vector<std::string>& args) {
    try {
        parse(args);
    } catch (const CLI::ParseError& e) {
        return e.what();
    }
    return {};
}

/// A cell map in a temporary file, removed with the object.
struct MapFile {
    std::string path;
    explicit MapFile(const std::string& text) {
        path = (std::filesystem::temp_directory_path() /
                ("aclaim-cells-" + std::to_string(::getpid()) + ".json"))
                   .string();
        std::ofstream(path) << text;
    }
    ~MapFile() { std::filesystem::remove(path); }
};

}  // namespace

TEST_CASE("worker options: --connect takes several endpoints", "[options][worker]") {
    ::unsetenv("ACLAIM_CONNECT");
    ::unsetenv("ACLAIM_CELLS");
    CHECK(parse({}).client.endpoints == std::vector<std::string>{"tcp://127.0.0.1:5555"});
    const auto o = parse({"--connect", "tcp://a:5555,tcp://b:5555", "--silence-timeout-ms", "900"});
    CHECK(o.client.endpoints == std::vector<std::string>{"tcp://a:5555", "tcp://b:5555"});
    CHECK(o.client.silence_timeout.count() == 900);
    CHECK(parse({"--connect", "tcp://a:1", "--connect", "tcp://b:2"}).client.endpoints.size() == 2);
    CHECK_THAT(refusal({"--connect", "a:5555"}), Catch::Contains("--connect"));
    CHECK_THAT(refusal({"--silence-timeout-ms", "10"}), Catch::Contains("--silence-timeout-ms"));

    ::setenv("ACLAIM_CONNECT", "tcp://c:1,tcp://d:2", 1);
    CHECK(parse({}).client.endpoints == std::vector<std::string>{"tcp://c:1", "tcp://d:2"});
    ::unsetenv("ACLAIM_CONNECT");
}

TEST_CASE("worker options: --cells gives the organization's coordinators", "[options][worker]") {
    ::unsetenv("ACLAIM_CONNECT");
    ::unsetenv("ACLAIM_CELLS");
    const MapFile map(R"({"cells": [
        {"name": "a", "dsn": "dbname=a", "coordinators": ["tcp://a1:5555", "tcp://a2:5555"],
         "organizations": [1]},
        {"name": "b", "dsn": "dbname=b", "coordinators": ["tcp://b1:5555"], "organizations": [2]}]})");
    CHECK(parse({"--cells", map.path, "--org", "1"}).client.endpoints ==
          std::vector<std::string>{"tcp://a1:5555", "tcp://a2:5555"});
    CHECK(parse({"--cells", map.path, "--org", "2"}).client.endpoints ==
          std::vector<std::string>{"tcp://b1:5555"});
    CHECK_THAT(refusal({"--cells", map.path, "--org", "3"}),
               Catch::Contains("no cell holds organization 3"));
    CHECK_THAT(refusal({"--cells", map.path}), Catch::Contains("needs --org"));
    CHECK_THAT(refusal({"--cells", map.path, "--org", "1", "--connect", "tcp://x:1"}),
               Catch::Contains("excludes"));
    CHECK_THAT(refusal({"--cells", "/nonexistent.json", "--org", "1"}),
               Catch::Contains("cannot be read"));

    ::setenv("ACLAIM_CELLS", map.path.c_str(), 1);
    CHECK(parse({"--org", "2"}).client.endpoints == std::vector<std::string>{"tcp://b1:5555"});
    ::unsetenv("ACLAIM_CELLS");
}

TEST_CASE("worker options: the secret key from a file only the owner can read",
          "[options][worker][keys]") {
    for (const char* v : {"ACLAIM_CURVE_SECRET_KEY", "ACLAIM_CURVE_SECRET_KEY_FILE",
                          "ACLAIM_CURVE_PUBLIC_KEY", "ACLAIM_CURVE_SERVER_KEY"}) {
        ::unsetenv(v);
    }
    std::array<char, 41> server_public{}, server_secret{}, public_key{}, secret_key{};
    REQUIRE(::zmq_curve_keypair(server_public.data(), server_secret.data()) == 0);
    REQUIRE(::zmq_curve_keypair(public_key.data(), secret_key.data()) == 0);
    const auto path = (std::filesystem::temp_directory_path() /
                       ("aclaim-worker-" + std::to_string(::getpid()) + ".key"))
                          .string();
    std::filesystem::remove(path);
    { std::ofstream(path) << secret_key.data() << "\n"; }
    const std::string server = std::string("--curve-server-key=") + server_public.data();

    std::filesystem::permissions(
        path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    const auto o = parse({server, "--curve-secret-key-file", path});
    CHECK(o.client.curve.client_secret == secret_key.data());
    // The public half is derived, so the file alone is enough.
    CHECK(o.client.curve.client_public == public_key.data());
    // The same through the environment, where ps shows nothing either.
    ::setenv("ACLAIM_CURVE_SECRET_KEY_FILE", path.c_str(), 1);
    CHECK(parse({server}).client.curve.client_secret == secret_key.data());
    ::unsetenv("ACLAIM_CURVE_SECRET_KEY_FILE");

    // Readable by its group or by others: refused, naming the file and its mode.
    for (const auto extra :
         {std::filesystem::perms::group_read, std::filesystem::perms::others_read}) {
        std::filesystem::permissions(path, extra, std::filesystem::perm_options::add);
        const auto why = refusal({server, "--curve-secret-key-file", path});
        CHECK_THAT(why, Catch::Contains(path) && Catch::Contains("chmod 600"));
        std::filesystem::permissions(path, extra, std::filesystem::perm_options::remove);
    }
    // A public key that is not the secret's, a flag and a file at once, a missing file.
    CHECK_THAT(refusal({server, "--curve-secret-key-file", path,
                        std::string("--curve-public-key=") + server_public.data()}),
               Catch::Contains("not the public key"));
    CHECK_FALSE(refusal({server, "--curve-secret-key-file", path,
                         std::string("--curve-secret-key=") + secret_key.data()})
                    .empty());
    CHECK_THAT(refusal({server, "--curve-secret-key-file", path + ".missing"}),
               Catch::Contains("cannot read"));
    // Not a key: the first line must be 40 characters of Z85.
    { std::ofstream(path, std::ios::trunc) << "short\n"; }
    CHECK_THAT(refusal({server, "--curve-secret-key-file", path}),
               Catch::Contains("does not hold a CURVE secret key"));
    std::filesystem::remove(path);
}
