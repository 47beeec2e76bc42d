#include "coordinator/http/http_server.hpp"

#include <httplib.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <stdexcept>

#include "common/base/clock.hpp"
#include "common/base/host_port.hpp"
#include "common/http/guarded_server.hpp"
#include "coordinator/http/prometheus.hpp"

namespace aclaim::coordinator {

namespace {

/// Scrapes and probes are tiny and rare; a few threads keep /metrics answering while a
/// readiness check waits for an unreachable database, and /healthz has two of its own.
constexpr std::size_t kHttpThreads = 4;
constexpr std::size_t kHealthThreads = 2;
/// A probe or a scrape sends its whole request at once; a client still sending after this is
/// answered 408 and closed, however steadily it trickles.
constexpr auto kRequestDeadline = std::chrono::seconds(5);
constexpr auto kWriteDeadline = std::chrono::seconds(5);

/// What the guard refused before any handler ran: slow or hostile HTTP clients at work.
std::string render_refusals(const http::HttpGuardCounts& c) {
    std::string out =
        "# HELP aclaim_http_refused_total HTTP requests refused before a handler: not complete "
        "by the deadline, a head too large, unframed, no thread free, or closed to make room.\n"
        "# TYPE aclaim_http_refused_total counter\n";
    for (const auto& [reason, n] : {std::pair{"timed_out", c.timed_out},
                                    {"too_large", c.too_large},
                                    {"malformed", c.malformed},
                                    {"overloaded", c.overloaded},
                                    {"evicted", c.evicted}}) {
        out += "aclaim_http_refused_total{reason=\"" + std::string(reason) + "\"} " +
               std::to_string(n) + "\n";
    }
    return out;
}

http::HttpGuardOptions guard_options() {
    http::HttpGuardOptions o;
    o.request_deadline = kRequestDeadline;
    o.write_deadline = kWriteDeadline;
    // The only body read is a callback's; a larger one is answered 413 unread.
    o.max_body_bytes = ParkCallback::kMaxBodyBytes;
    o.light_threads = kHealthThreads;
    o.threads = kHttpThreads;
    // /healthz reads one atomic: it must answer while every other thread waits on the database.
    o.light = [](std::string_view method, std::string_view path) {
        return (method == "GET" || method == "HEAD") && path == "/healthz";
    };
    return o;
}
/// How long start() waits for the listening thread, in steps of kStartStep; it only has to
/// enter its accept loop.
constexpr auto kStartStep = std::chrono::milliseconds(1);
constexpr int kStartSteps = 5000;

const base::SystemClock kSystemClock;

}  // namespace

HttpServer::HttpServer(HttpOptions options, const Metrics& metrics)
    : HttpServer(std::move(options), metrics, kSystemClock) {}

HttpServer::HttpServer(HttpOptions options, const Metrics& metrics, const base::Clock& clock)
    : options_(std::move(options)),
      metrics_(metrics),
      queue_metrics_(options_.dsn.empty() ? nullptr
                                          : std::make_unique<QueueMetrics>(options_.dsn, clock)),
      readiness_(options_.dsn, clock),
      callback_(options_.dsn.empty() ? nullptr
                                     : std::make_unique<ParkCallback>(options_.dsn, clock)),
      server_(std::make_unique<http::GuardedServer>(guard_options())) {}

HttpServer::~HttpServer() {
    stop();
}

void HttpServer::routes() {
    server_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
        std::string text = render_prometheus(metrics_, options_);
        if (queue_metrics_) text += queue_metrics_->render();
        text += render_refusals(server_->counts());
        res.set_content(text, std::string(kPrometheusContentType));
    });
    server_->Get("/healthz", [this](const httplib::Request&, httplib::Response& res) {
        const std::int64_t tick = metrics_.router_tick_ns.load();
        // The router stamps its tick with the system's monotonic time (see housekeeping()):
        // whether a thread still runs is a question about real time, whatever clock it is given.
        const auto now = base::SystemClock().monotonic_now().time_since_epoch();
        const auto age = now - std::chrono::steady_clock::duration(tick);
        if (tick != 0 && age > kStallLimit) {
            res.status = 503;
            res.set_content(
                "router thread stalled: last ran " +
                    std::to_string(std::chrono::duration_cast<std::chrono::seconds>(age).count()) +
                    " s ago\n",
                "text/plain");
            return;
        }
        res.set_content(tick == 0 ? "ok: starting\n" : "ok\n", "text/plain");
    });
    server_->Post("/v1/callback", [this](const httplib::Request& req, httplib::Response& res) {
        CallbackReply r{503, R"({"accepted":false,"reason":"unavailable","detail":"no database"})"};
        if (callback_) {
            r = callback_->handle({req.get_header_value("Authorization"), req.body,
                                   req.remote_addr + ":" + std::to_string(req.remote_port)});
        }
        (r.accepted ? metrics_.callbacks_accepted : metrics_.callbacks_refused)
            .fetch_add(1, std::memory_order_relaxed);
        res.status = r.status;
        if (r.retry_after_s > 0) res.set_header("Retry-After", std::to_string(r.retry_after_s));
        res.set_content(r.body, "application/json");
    });
    // The callback's refusals that httplib decides itself (a body over the limit: 413) are
    // answered in JSON too; the other paths keep httplib's plain answers.
    server_->set_error_handler(httplib::Server::HandlerWithResponse(
        [](const httplib::Request& req, httplib::Response& res) {
            if (req.path != "/v1/callback" || !res.body.empty()) {
                return httplib::Server::HandlerResponse::Unhandled;
            }
            res.set_content(R"({"accepted":false,"reason":")" +
                                std::string(res.status == 413 ? "oversized" : "invalid") +
                                R"(","detail":"HTTP )" + std::to_string(res.status) + R"("})",
                            "application/json");
            return httplib::Server::HandlerResponse::Handled;
        }));
    server_->Get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
        const Readiness r = readiness_.check();
        res.status = r.ready ? 200 : 503;
        res.set_content((r.ready ? "ready: " : "not ready: ") + r.detail + "\n", "text/plain");
    });
}

void HttpServer::start() {
    const auto where = base::parse_host_port(options_.http_bind);
    if (!where)
        throw std::runtime_error("--http-bind '" + options_.http_bind + "' is not host:port");
    routes();
    // httplib's default adds SO_REUSEPORT, which would let a second coordinator on this host
    // bind the same port and answer half of the scrapes. SO_REUSEADDR alone still lets a
    // restarted coordinator rebind while old connections linger in TIME_WAIT.
    server_->set_socket_options([](socket_t sock) {
        const int yes = 1;
        ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    });
    if (where->port == 0) {
        port_ = server_->bind_to_any_port(where->host);
        if (port_ <= 0) port_ = 0;
    } else if (server_->bind_to_port(where->host, where->port)) {
        port_ = where->port;
    }
    if (port_ == 0) {
        throw std::runtime_error("cannot listen for HTTP on " + options_.http_bind +
                                 " (address in use, or not an address of this host)");
    }
    const bool v6 = where->host.find(':') != std::string::npos;
    address_ = (v6 ? "[" + where->host + "]" : where->host) + ":" + std::to_string(port_);
    thread_ = std::thread([this] {
        server_->listen_after_bind();
        listening_done_.store(true);
    });
    // stop() is only heard by a server inside its accept loop, so wait until it is there.
    for (int step = 0; step < kStartSteps && !server_->is_running() && !listening_done_.load();
         ++step) {
        std::this_thread::sleep_for(kStartStep);
    }
    spdlog::info("http: /metrics, /healthz, /readyz and POST /v1/callback on {}", address_);
}

void HttpServer::stop() {
    if (!thread_.joinable()) return;
    while (!(server_->is_running() && server_->listened()) && !listening_done_.load()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (listening_done_.load()) {
        // Its loop ended by itself: joined first, so that closing the socket follows its last
        // use of it (ThreadSanitizer sees no order between the two otherwise).
        thread_.join();
        server_->stop();
    } else {
        server_->stop();
        thread_.join();
    }
    server_->drain();
}

}  // namespace aclaim::coordinator
