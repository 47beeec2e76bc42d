// End to end under hostile input: a CURVE coordinator as a real process, four real workers
// draining 1,000 jobs, while an authenticated client floods the ROUTER with garbage of every kind
// and an unauthenticated one keeps trying to get through the handshake. Every job must still be
// completed exactly once, the coordinator must stay up, answer the garbage, count it, and keep its
// memory bounded.

#include <httplib.h>
#include <signal.h>
#include <zmq.h>

#include <array>
#include <atomic>
#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "common/ops/worker_keys.hpp"
#include "common/proto/protocol.hpp"
#include "tests/e2e/cluster.hpp"

using namespace aclaim::testing;
using namespace std::chrono_literals;
namespace proto = aclaim::proto;

namespace {

constexpr int kJobs = 1000;
constexpr int kWorkers = 4;
constexpr std::size_t kMaxBodyBytes = 4096;
constexpr int kMaxInflight = 8;
/// The coordinator's resident set must stay below this through the storm: a behaviour check
/// (nothing grows with the garbage), far above what it needs.
constexpr long kRssLimitKb = 200L * 1024;

using KeyPair = aclaim::ops::CurveKeyPair;

/// Throws rather than failing a Catch assertion, so that client threads may call it too.
KeyPair new_pair() {
    return aclaim::ops::make_curve_key_pair();
}

/// VmRSS of a process in kB, or -1 when it cannot be read.
long rss_kb(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
    }
    return -1;
}

std::map<std::string, double> parse_samples(const std::string& text) {
    std::map<std::string, double> out;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
        if (line.empty() || line[0] == '#') continue;
        const auto space = line.rfind(' ');
        if (space != std::string::npos)
            out[line.substr(0, space)] = std::stod(line.substr(space + 1));
    }
    return out;
}

double sample(const std::map<std::string, double>& m, const std::string& name) {
    const auto it = m.find(name);
    return it == m.end() ? -1 : it->second;
}

/// A DEALER under CURVE that sends raw frames and reads whatever comes back.
class CurveSocket {
  public:
    CurveSocket(zmq::context_t& ctx, const std::string& endpoint, const std::string& server_public,
                const KeyPair& client)
        : socket_(ctx, zmq::socket_type::dealer) {
        socket_.set(zmq::sockopt::linger, 0);
        socket_.set(zmq::sockopt::curve_serverkey, server_public);
        socket_.set(zmq::sockopt::curve_publickey, client.public_key);
        socket_.set(zmq::sockopt::curve_secretkey, client.secret_key);
        socket_.connect(endpoint);
    }

    void send(const std::vector<std::string>& frames) {
        for (std::size_t i = 0; i < frames.size(); ++i) {
            (void)socket_.send(zmq::buffer(frames[i]), i + 1 < frames.size()
                                                           ? zmq::send_flags::sndmore
                                                           : zmq::send_flags::none);
        }
    }

    void send(const proto::Message& m, proto::Encoding enc = proto::Encoding::Binary) {
        const auto f = proto::encode(m, enc);
        send({f.tag, f.type, f.body});
    }

    /// The next message decoded, within `limit`; nothing on timeout. Undecodable replies fail.
    std::optional<proto::Message> receive(std::chrono::milliseconds limit) {
        zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
        if (zmq::poll(&item, 1, limit) == 0) return std::nullopt;
        std::vector<zmq::message_t> parts;
        if (!zmq::recv_multipart(socket_, std::back_inserter(parts))) return std::nullopt;
        std::vector<std::string_view> frames;
        for (const auto& p : parts) frames.push_back(p.to_string_view());
        auto decoded = proto::decode(frames);
        if (!std::holds_alternative<proto::Decoded>(decoded)) {
            throw std::runtime_error("the coordinator sent an undecodable reply: " +
                                     std::get<proto::DecodeError>(decoded).text);
        }
        return std::get<proto::Decoded>(std::move(decoded)).message;
    }

  private:
    zmq::socket_t socket_;
};

/// What the flooding client saw.
struct FloodReport {
    std::uint64_t sent = 0;
    std::uint64_t errors = 0;
    std::map<std::string, std::uint64_t> by_code;
    std::uint64_t other_replies = 0;
    std::string failure;  ///< set when the flood could not run as planned
};

/// An authenticated client (org 2, which has no jobs) that sends every kind of garbage in rounds
/// until `stop`, reading the replies of each round before the next so that its own queue never
/// overflows; the rate is as fast as the coordinator answers.
FloodReport flood(const std::string& endpoint, const std::string& server_public, const KeyPair& key,
                  const std::atomic<bool>& stop, std::atomic<std::uint64_t>& rounds) {
    FloodReport r;
    try {
        zmq::context_t ctx;
        CurveSocket s(ctx, endpoint, server_public, key);
        s.send(proto::Hello{1, "flooder", 2});
        const auto welcome = s.receive(10s);
        if (!welcome || !std::holds_alternative<proto::Welcome>(*welcome)) {
            r.failure = "the flooding client got no WELCOME";
            return r;
        }
        std::mt19937_64 rng(20240607);
        auto random_bytes = [&rng](std::size_t n) {
            std::string out(n, '\0');
            for (auto& ch : out) ch = static_cast<char>(rng() & 0xff);
            return out;
        };
        const auto complete =
            proto::encode(proto::Complete{77, 1, 1, "review:flooder"}, proto::Encoding::Binary);
        std::uint64_t req = 100;
        while (!stop.load()) {
            std::uint64_t expected = 0;
            auto send = [&](const std::vector<std::string>& frames) {
                s.send(frames);
                ++r.sent;
                ++expected;
            };
            // Random bytes, one to three frames of them.
            send({random_bytes(1 + rng() % 200)});
            send({random_bytes(1 + rng() % 50), random_bytes(1 + rng() % 50),
                  random_bytes(1 + rng() % 50)});
            // A binary body cut short.
            send({complete.tag, complete.type,
                  complete.body.substr(0, 1 + rng() % (complete.body.size() - 1))});
            // A body over --max-body-bytes (and under the transport's 1 MiB, which would drop
            // the connection instead of answering).
            send({complete.tag, complete.type, random_bytes(kMaxBodyBytes + 1 + rng() % 4096)});
            // A protocol version this coordinator does not speak.
            send({"ACLAIM/9", "CLAIM", complete.body});
            // A message type that does not exist.
            send({std::string(proto::kTagBinary), "EXPLODE", complete.body});
            // A valid header with a body that does not parse, in either encoding.
            send({std::string(proto::kTagBinary), "RENEW", random_bytes(1 + rng() % 7)});
            send({std::string(proto::kTagJson), "CLAIM", "{\"req\": 5, \"max_jobs\": ["});
            // Too many frames.
            send({complete.tag, complete.type, complete.body, "x", "y", "z", "w"});
            // Long-polling claims beyond the per-session limit: the first kMaxInflight park
            // (organization 2 has no jobs) and stay parked; the rest are refused at once.
            for (int i = 0; i < kMaxInflight + 4; ++i) {
                s.send(proto::Claim{++req, 1, proto::kMaxClaimWaitMs});
                ++r.sent;
                ++expected;
            }
            // Read this round's replies; parked claims are not answered, so stop at a pause.
            std::uint64_t got = 0;
            while (got < expected) {
                const auto m = s.receive(got + kMaxInflight >= expected ? 20ms : 2000ms);
                if (!m) break;
                ++got;
                if (const auto* e = std::get_if<proto::Error>(&*m)) {
                    ++r.errors;
                    ++r.by_code[e->code];
                } else {
                    ++r.other_replies;
                }
            }
            rounds.fetch_add(1);
        }
    } catch (const std::exception& e) {
        r.failure = e.what();
    }
    return r;
}

/// What the unauthenticated client saw: attempts made, and answers it should never have had.
struct IntruderReport {
    int attempts = 0;
    int answered = 0;
    std::string failure;
};

/// Keeps opening CURVE connections with keys nobody registered and saying HELLO on them.
IntruderReport intrude(const std::string& endpoint, const std::string& server_public,
                       const std::atomic<bool>& stop) {
    IntruderReport r;
    try {
        zmq::context_t ctx;
        while (!stop.load()) {
            CurveSocket s(ctx, endpoint, server_public, new_pair());
            s.send(proto::Hello{1, "intruder", 1});
            ++r.attempts;
            if (s.receive(250ms)) ++r.answered;
        }
    } catch (const std::exception& e) {
        r.failure = e.what();
    }
    return r;
}

}  // namespace

TEST_CASE("a garbage storm during a CURVE drain changes nothing and is answered and counted",
          "[e2e][security]") {
    Cluster c;
    INFO("logs in " << c.log_dir());
    c.enqueue(1, kJobs);

    // Keys the way an operator makes them: the coordinator's secret in a 0600 file, every
    // worker's public key registered with aclaimctl.
    const auto server = c.use_new_curve_keys();
    std::vector<KeyPair> worker_keys;
    for (int i = 0; i < kWorkers; ++i) {
        worker_keys.push_back(new_pair());
        // One key begins with "-" (about one Z85 key in 85 does): on the command lines of
        // aclaimctl and the worker it must still read as a key, not as an option.
        while (i == 0 && worker_keys.back().public_key.front() != '-')
            worker_keys.back() = new_pair();
        c.register_key(1, "w" + std::to_string(i), worker_keys.back().public_key);
    }
    const auto flooder_key = new_pair();
    c.register_key(2, "flooder", flooder_key.public_key);

    const int http_port = free_port();
    auto& coordinator = c.start_coordinator(
        {"--lease-ms", "5000", "--http-bind", "127.0.0.1:" + std::to_string(http_port),
         "--max-body-bytes", std::to_string(kMaxBodyBytes), "--max-inflight-per-session",
         std::to_string(kMaxInflight), "--key-cache-ms", "500"});
    httplib::Client http("127.0.0.1", http_port);
    http.set_connection_timeout(2);
    http.set_read_timeout(5);
    const bool up = eventually(
        [&] {
            auto res = http.Get("/healthz");
            return res && res->status == 200 && res->body == "ok\n";
        },
        20s);
    if (!up) FAIL("the coordinator did not come up\n" << c.tail_logs());

    std::atomic<bool> stop{false};
    std::atomic<std::uint64_t> flood_rounds{0};
    FloodReport flood_report;
    IntruderReport intruder_report;
    std::thread flooder([&] {
        flood_report = flood(c.endpoint(), server.public_key, flooder_key, stop, flood_rounds);
    });
    std::thread intruder([&] { intruder_report = intrude(c.endpoint(), server.public_key, stop); });
    // Joins the clients however this test ends.
    struct Joiner {
        std::atomic<bool>& stop;
        std::thread& a;
        std::thread& b;
        ~Joiner() {
            stop.store(true);
            if (a.joinable()) a.join();
            if (b.joinable()) b.join();
        }
    } joiner{stop, flooder, intruder};

    // The storm is on before the workers start, and lasts until every job is done.
    if (!eventually([&] { return flood_rounds.load() > 0 || !coordinator.running(); }, 20s) ||
        !coordinator.running()) {
        stop.store(true);
        flooder.join();
        FAIL("the flood did not start: " << flood_report.failure << "\n" << c.tail_logs());
    }
    std::vector<Process*> workers;
    for (int i = 0; i < kWorkers; ++i) {
        workers.push_back(&c.start_worker(
            "w" + std::to_string(i), 1,
            {"--review-ms", "2", "--concurrency", "4", "--curve-server-key=" + server.public_key,
             "--curve-public-key=" + worker_keys[i].public_key,
             "--curve-secret-key=" + worker_keys[i].secret_key}));
    }

    long max_rss = 0;
    const bool drained = eventually(
        [&] {
            max_rss = std::max(max_rss, rss_kb(coordinator.pid()));
            return c.scalar("SELECT count(*) FROM jobs WHERE state = 'completed'") == kJobs ||
                   !coordinator.running();
        },
        45s);
    max_rss = std::max(max_rss, rss_kb(coordinator.pid()));
    const bool alive = coordinator.running();
    // Still storming: the coordinator must answer its probe while under it.
    auto health = http.Get("/healthz");
    auto scrape = http.Get("/metrics");
    stop.store(true);
    flooder.join();
    intruder.join();
    if (!drained || !alive) {
        FAIL("drained=" << drained << " alive=" << alive << "\n" << c.tail_logs());
    }

    // The coordinator survived and still answers.
    REQUIRE(health);
    CHECK(health->status == 200);
    CHECK(health->body == "ok\n");
    INFO("coordinator VmRSS peaked at " << max_rss << " kB");
    CHECK(max_rss > 0);
    CHECK(max_rss < kRssLimitKb);

    // Every job completed exactly once, at its latest generation, by a registered worker.
    CHECK(c.scalar("SELECT count(*) FROM jobs WHERE state = 'completed'") == kJobs);
    CHECK(c.scalar("SELECT count(*) FROM (SELECT job_id FROM job_events WHERE kind = 'completed' "
                   "GROUP BY job_id HAVING count(*) = 1) s") == kJobs);
    CHECK(c.scalar("SELECT count(*) FROM job_events WHERE kind = 'completed'") == kJobs);
    CHECK(c.scalar("SELECT count(*) FROM jobs WHERE assignee NOT IN ('w0', 'w1', 'w2', 'w3')") ==
          0);
    // The flooder's organization has no jobs and none were made for it.
    CHECK(c.scalar("SELECT count(*) FROM job_events WHERE org_id = 2 OR worker = 'flooder'") == 0);

    // The flooding client got its garbage answered, with the code that names what was wrong.
    INFO("flood: sent " << flood_report.sent << ", " << flood_report.errors << " ERROR replies, "
                        << flood_report.other_replies << " other replies");
    CHECK(flood_report.failure == "");
    CHECK(flood_report.errors > 0);
    for (const char* code : {"malformed", "wrong_version", "unknown_type", "undecodable",
                             "oversized", "too_many_requests"}) {
        INFO("ERROR " << code);
        CHECK(flood_report.by_code[code] > 0);
    }
    // Nothing but ERROR: parked claims are only answered when the coordinator stops.
    CHECK(flood_report.other_replies == 0);

    // The unauthenticated client never got past the handshake.
    CHECK(intruder_report.failure == "");
    CHECK(intruder_report.attempts > 0);
    CHECK(intruder_report.answered == 0);

    // The counters went up: errors by code, and refused handshakes.
    REQUIRE(scrape);
    REQUIRE(scrape->status == 200);
    const auto m = parse_samples(scrape->body);
    for (const char* code : {"malformed", "wrong_version", "unknown_type", "undecodable",
                             "oversized", "too_many_requests"}) {
        INFO("aclaim_errors_total{code=\"" << code << "\"}");
        CHECK(sample(m, std::string("aclaim_errors_total{code=\"") + code + "\"}") > 0);
    }
    CHECK(sample(m, "aclaim_auth_curve_enabled") == 1);
    CHECK(sample(m, "aclaim_auth_handshakes_total{outcome=\"refused\"}") > 0);
    CHECK(sample(m, "aclaim_auth_handshakes_total{outcome=\"accepted\"}") >= kWorkers + 1);
    CHECK(sample(m, "aclaim_auth_handshakes_total{outcome=\"failed\"}") == 0);
    CHECK(sample(m, "aclaim_completions_total") == kJobs);

    for (auto* w : workers) w->signal(SIGTERM);
    for (auto* w : workers) CHECK(w->wait_for(15s) == std::optional<int>(0));
    coordinator.signal(SIGTERM);
    CHECK(coordinator.wait_for(15s) == std::optional<int>(0));

    // The invariant checker, as an operator runs it.
    Process check({bin("aclaimctl"), "check"}, {{"ACLAIM_DSN", c.db().dsn()}},
                  c.log_dir() + "/check.log");
    const auto check_status = check.wait_for(30s);
    if (check_status != std::optional<int>(0)) FAIL("aclaimctl check failed\n" << c.tail_logs());
    const auto report = c.check();
    for (const auto& v : report.violations) UNSCOPED_INFO(v.evidence);
    CHECK(report.ok());
}
