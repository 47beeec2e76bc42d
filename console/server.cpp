#include "console/server.hpp"

#include <httplib.h>
#include <netdb.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <stdexcept>
#include <thread>

#include "common/base/bounded_json.hpp"
#include "common/base/logging.hpp"
#include "common/http/guarded_server.hpp"
#include "common/ops/recovery.hpp"
#include "common/store/job_states.hpp"
#include "common/store/outage_exit.hpp"
#include "console/assets.hpp"

namespace aclaim::console {

using nlohmann::json;

namespace {

constexpr const char* kCookie = "aclaim_console";
constexpr int kMaxPage = 500;
/// What a 500 says: the console's log has the rest.
constexpr const char* kInternalError = "the console failed to answer; its log says why";

// No inline script or style anywhere: every script and stylesheet is an embedded file.
constexpr const char* kContentSecurityPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Operators' pages ask for little and send less: a request still arriving after this is cut
/// off (408), so that slow clients hold no thread; the sign-in page and its assets have threads
/// of their own, answered from memory while every other thread waits on the database.
constexpr auto kRequestDeadline = std::chrono::seconds(10);
constexpr auto kWriteDeadline = std::chrono::seconds(10);
constexpr std::size_t kMaxBodyBytes = std::size_t{64} * 1024;
constexpr std::size_t kApiThreads = 6;
constexpr std::size_t kPageThreads = 2;

http::HttpGuardOptions guard_options() {
    http::HttpGuardOptions o;
    o.request_deadline = kRequestDeadline;
    o.write_deadline = kWriteDeadline;
    o.max_body_bytes = kMaxBodyBytes;
    o.threads = kApiThreads;
    o.light_threads = kPageThreads;
    o.light = [](std::string_view method, std::string_view path) {
        return (method == "GET" || method == "HEAD") &&
               (path == "/" || path == "/favicon.svg" || path == "/favicon.ico" ||
                path.rfind("/assets/", 0) == 0);
    };
    return o;
}

void send_json(httplib::Response& res, int status, const json& body) {
    res.status = status;
    res.set_content(body.dump(), "application/json");
}

/// 200 with `body`, or `status` saying `error` when there is none.
void send_found(httplib::Response& res, const std::optional<json>& body, int status,
                const char* error) {
    if (!body) {
        send_json(res, status, {{"error", error}});
        return;
    }
    send_json(res, 200, *body);
}

std::optional<std::string> cookie_token(const httplib::Request& req) {
    const auto header = req.get_header_value("Cookie");
    const std::string key = std::string(kCookie) + "=";
    std::size_t pos = 0;
    while (pos < header.size()) {
        while (pos < header.size() && (header[pos] == ' ' || header[pos] == ';')) ++pos;
        const auto end = header.find(';', pos);
        const auto item = header.substr(pos, end == std::string::npos ? end : end - pos);
        if (item.rfind(key, 0) == 0) return item.substr(key.size());
        if (end == std::string::npos) break;
        pos = end + 1;
    }
    return std::nullopt;
}

std::optional<long long> int_param(const httplib::Request& req, const char* name) {
    if (!req.has_param(name) || req.get_param_value(name).empty()) return std::nullopt;
    try {
        return std::stoll(req.get_param_value(name));
    } catch (const std::exception&) {
        throw std::invalid_argument(std::string("parameter ") + name + " is not a number");
    }
}

/// An id from the path. The routes admit digits only, but not every run of digits is an id: one
/// past the range of bigint is the caller's mistake (400), not the server's.
long long path_id(const std::string& digits) {
    long long v = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
    if (ec != std::errc() || end != digits.data() + digits.size()) {
        throw std::invalid_argument("'" + digits.substr(0, 40) +
                                    "' is not an id (0 to 9223372036854775807)");
    }
    return v;
}

std::optional<std::string> text_param(const httplib::Request& req, const char* name) {
    if (!req.has_param(name) || req.get_param_value(name).empty()) return std::nullopt;
    return req.get_param_value(name);
}

/// An action's reason from its JSON body; answers 400 itself (and returns nothing) when there is
/// none, since every action is recorded with why.
std::optional<std::string> reason_of(const httplib::Request& req, httplib::Response& res) {
    const auto body = base::parse_bounded_json_or_discarded(req.body);
    const std::string reason =
        body.is_object() && body.contains("reason") && body["reason"].is_string()
            ? body["reason"].get<std::string>()
            : "";
    if (reason.find_first_not_of(" \t\n") == std::string::npos) {
        send_json(res, 400, {{"error", "say why: the reason is recorded in the audit log"}});
        return std::nullopt;
    }
    return reason;
}

/// Done is 200, refused 409 (the job is not in a state the action applies to, or moved), not
/// found (or not visible to the operator) 404.
void send_action(httplib::Response& res, const ActionResult& r) {
    const int status = r.kind == ActionResult::Kind::Done      ? 200
                       : r.kind == ActionResult::Kind::Refused ? 409
                                                               : 404;
    send_json(res, status, r.body);
}

/// An unexpected failure of the request: 500 with a fixed message. The detail (a statement, a
/// table, a server's wording) goes to the log, escaped, and never to the client.
void send_failure(const httplib::Request& req, httplib::Response& res, const std::exception& e) {
    spdlog::error("console: {} {}: {}", base::printable(req.method), base::printable(req.path),
                  base::printable(e.what()));
    send_json(res, 500, {{"error", kInternalError}});
}

/// The job states the pages show, from the one list (common/store/job_states.hpp): every state in
/// display order, the per-queue table's columns, and those cancel and retry act on.
json states_json() {
    json all = json::array();
    for (const auto& s : store::kJobStates) all.push_back(s.name);
    return {{"all", all},
            {"queue", store::state_names(store::kQueueStates)},
            {"cancellable", store::state_names(store::kCancellableStates)},
            {"retryable", store::state_names(store::kRetryableStates)}};
}

/// Why `host`:`port` cannot be bound, in the system's words (one bind of our own, with the
/// options the server uses): httplib says only that it failed.
std::string why_not_bindable(const std::string& host, int port) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    addrinfo* found = nullptr;
    const std::string service = std::to_string(port);
    if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0)
        return std::string("no such address (") + ::gai_strerror(rc) + ")";
    std::string why = "the address cannot be bound";
    for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
        const int sock = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (sock < 0) continue;
        const int yes = 1;
        ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
        const bool bound = ::bind(sock, a->ai_addr, a->ai_addrlen) == 0;
        const int error = errno;
        ::close(sock);
        if (!bound) {
            why = std::strerror(error);
            if (error == EADDRINUSE) why += " (another console, or another program, listens there)";
            break;
        }
    }
    ::freeaddrinfo(found);
    return why;
}

}  // namespace

ConsoleServer::ConsoleServer(Views& views) : ConsoleServer(views, views.clock()) {}

ConsoleServer::ConsoleServer(Views& views, const base::Clock& clock)
    : views_(views),
      clock_(clock),
      server_(std::make_unique<http::GuardedServer>(guard_options())) {
    routes();
}

ConsoleServer::~ConsoleServer() = default;

int ConsoleServer::bind(const std::string& host, int port) {
    // httplib's default adds SO_REUSEPORT, which would let a second console bind the same port
    // and take half of the requests. SO_REUSEADDR alone still lets a restarted console rebind
    // while old connections linger in TIME_WAIT.
    server_->set_socket_options([](socket_t sock) {
        const int yes = 1;
        ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    });
    const int bound = port == 0 ? server_->bind_to_any_port(host)
                                : (server_->bind_to_port(host, port) ? port : -1);
    if (bound <= 0) {
        const bool v6 = host.find(':') != std::string::npos;
        throw BindError("cannot listen on " + (v6 ? "[" + host + "]" : host) + ":" +
                        std::to_string(port) + ": " + why_not_bindable(host, port));
    }
    return bound;
}

void ConsoleServer::run() {
    if (!stopping_.load()) server_->listen_after_bind();
    finished_.store(true);
    server_->drain();
}

void ConsoleServer::stop() {
    stopping_.store(true);
    // httplib hears stop() only inside its accept loop: a stop that came while run() was on its
    // way there would be lost and the console would serve on. So wait until run() is in the loop
    // (or has seen stopping_ and returned); the wait is the few instructions between the two.
    while (!server_->is_running() && !finished_.load())
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    server_->stop();
}

void ConsoleServer::routes() {
    auto& s = *server_;
    s.set_default_headers({{"Content-Security-Policy", kContentSecurityPolicy},
                           {"X-Frame-Options", "DENY"},
                           {"X-Content-Type-Options", "nosniff"},
                           {"Referrer-Policy", "no-referrer"},
                           {"Cache-Control", "no-store"}});

    // Every API but sign-in wants a session; every POST but sign-in wants the session's CSRF
    // token. The session travels to the handlers in a header only this handler may set.
    s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
        if (req.path.rfind("/api/", 0) != 0 && req.path.rfind("/reports/", 0) != 0) {
            return httplib::Server::HandlerResponse::Unhandled;
        }
        // Sign-in, and the question "am I signed in?" (answered without an error status, so
        // that the sign-in page loads without one).
        if (req.path == "/api/login" || (req.path == "/api/session" && req.method == "GET")) {
            return httplib::Server::HandlerResponse::Unhandled;
        }
        const auto token = cookie_token(req);
        const auto session = token ? sessions_.find(*token) : std::nullopt;
        if (!session) {
            send_json(res, 401, {{"error", "sign in first"}});
            return httplib::Server::HandlerResponse::Handled;
        }
        if (req.method != "GET" && req.method != "HEAD") {
            const auto csrf = req.get_header_value("X-CSRF-Token");
            if (csrf.empty() || csrf != session->csrf) {
                spdlog::warn("console: refused {} {} by {} without a valid CSRF token",
                             base::printable(req.method), base::printable(req.path),
                             base::printable(session->op.name));
                send_json(res, 403, {{"error", "missing or wrong CSRF token"}});
                return httplib::Server::HandlerResponse::Handled;
            }
        }
        return httplib::Server::HandlerResponse::Unhandled;
    });

    auto session_of = [this](const httplib::Request& req) {
        const auto session = sessions_.find(cookie_token(req).value_or(""));
        if (!session) throw std::runtime_error("the session ended during the request");
        return *session;
    };

    s.set_exception_handler(
        [](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
            try {
                std::rethrow_exception(std::move(ep));
            } catch (const std::invalid_argument& e) {
                send_json(res, 400, {{"error", e.what()}});
            } catch (const pqxx::broken_connection& e) {
                // Unreachable, or no answer within --connect-timeout: the database's outage, not
                // the request's fault; the next request connects again.
                spdlog::error("console: {} {}: cannot reach the database: {}",
                              base::printable(req.method), base::printable(req.path),
                              base::printable(e.what()));
                send_json(res, 503, {{"error", "the database cannot be reached"}});
            } catch (const DatabaseBusy& e) {
                spdlog::error("console: {} {}: the database did not answer in time: {}",
                              base::printable(req.method), base::printable(req.path), e.what());
                send_json(res, 503,
                          {{"error", "the database did not answer within --statement-timeout"}});
            } catch (const pqxx::sql_error& e) {
                if (e.sqlstate() != store::kStatementTimeoutState) {
                    send_failure(req, res, e);
                    return;
                }
                spdlog::error("console: {} {}: the database did not answer in time: {}",
                              base::printable(req.method), base::printable(req.path),
                              base::printable(e.what()));
                send_json(res, 503,
                          {{"error", "the database did not answer within --statement-timeout"}});
            } catch (const std::exception& e) {
                send_failure(req, res, e);
            }
        });

    auto asset = [](const std::string& name) {
        return [name](const httplib::Request&, httplib::Response& res) {
            const auto a = find_asset(name);
            if (!a) {
                res.status = 404;
                return;
            }
            res.set_content(std::string(a->bytes), content_type_of(name).c_str());
        };
    };
    s.Get("/", asset("index.html"));
    s.Get("/favicon.svg", asset("icon.svg"));
    s.Get("/favicon.ico", asset("icon.svg"));
    s.Get(R"(/assets/([A-Za-z0-9_.-]+))", [](const httplib::Request& req, httplib::Response& res) {
        const auto name = req.matches[1].str();
        const auto a = find_asset(name);
        if (!a) {
            res.status = 404;
            return;
        }
        res.set_content(std::string(a->bytes), content_type_of(name).c_str());
    });

    s.Post("/api/login", [this](const httplib::Request& req, httplib::Response& res) {
        // A JSON body: a cross-site form cannot send one without a CORS preflight, which this
        // server never grants, so sign-in cannot be forged from another site either.
        if (req.get_header_value("Content-Type").rfind("application/json", 0) != 0) {
            send_json(res, 415, {{"error", "sign in with a JSON body"}});
            return;
        }
        const auto body = base::parse_bounded_json_or_discarded(req.body);
        if (!body.is_object() || !body.contains("name") || !body.contains("password") ||
            !body["name"].is_string() || !body["password"].is_string()) {
            send_json(res, 400, {{"error", "name and password are required"}});
            return;
        }
        const auto name = body["name"].get<std::string>();
        // Throttled before the password is looked at: a refused guess costs no hash.
        if (const auto wait = throttle_.admit(name, req.remote_addr)) {
            const auto seconds =
                std::max<long long>(1, std::chrono::ceil<std::chrono::seconds>(*wait).count());
            spdlog::debug("console: sign-in as '{}' from {} throttled for {} s",
                          base::printable(name), req.remote_addr, seconds);
            res.set_header("Retry-After", std::to_string(seconds));
            send_json(res, 429,
                      {{"error",
                        "too many failed sign-ins: try again in " + std::to_string(seconds) + " s"},
                       {"retry_after_s", seconds}});
            return;
        }
        const auto op = views_.authenticate({name, body["password"].get<std::string>()});
        if (!op) {
            spdlog::warn("console: failed sign-in as '{}' from {}", base::printable(name),
                         req.remote_addr);
            send_json(res, 401, {{"error", "wrong name or password"}});
            return;
        }
        throttle_.succeeded(name, req.remote_addr);
        const auto token = sessions_.open(*op);
        res.set_header("Set-Cookie",
                       std::string(kCookie) + "=" + token + "; Path=/; HttpOnly; SameSite=Strict");
        spdlog::info("console: {} signed in", base::printable(op->name));
        send_json(res, 200, {{"operator", op->name}});
    });

    s.Post("/api/logout", [this](const httplib::Request& req, httplib::Response& res) {
        if (const auto token = cookie_token(req)) sessions_.close(*token);
        res.set_header("Set-Cookie", std::string(kCookie) + "=; Path=/; Max-Age=0");
        send_json(res, 200, json::object());
    });

    s.Get("/api/session", [this](const httplib::Request& req, httplib::Response& res) {
        const auto session = sessions_.find(cookie_token(req).value_or(""));
        if (!session) {
            send_json(res, 200, {{"operator", nullptr}, {"states", states_json()}});
            return;
        }
        send_json(res, 200,
                  {{"operator", session->op.name},
                   {"orgs", session->op.orgs ? json(*session->op.orgs) : json(nullptr)},
                   {"csrf", session->csrf},
                   {"states", states_json()}});
    });

    s.Get("/api/overview", [this, session_of](const httplib::Request& req, httplib::Response& res) {
        send_json(res, 200, views_.overview(session_of(req).op, clock_.now()));
    });

    s.Get("/api/leases", [this, session_of](const httplib::Request& req, httplib::Response& res) {
        send_json(res, 200, views_.leases(session_of(req).op, clock_.now()));
    });

    s.Get("/api/jobs", [this, session_of](const httplib::Request& req, httplib::Response& res) {
        ops::JobFilter q;
        q.org_id = int_param(req, "org");
        q.queue = text_param(req, "queue");
        q.state = text_param(req, "state");
        q.assignee = text_param(req, "holder");
        if (const auto before = text_param(req, "before")) {
            q.enqueued_before = ops::parse_instant(*before);
            if (!q.enqueued_before) throw std::invalid_argument("before is not an ISO 8601 time");
        }
        q.after_id = int_param(req, "after").value_or(0);
        q.limit = static_cast<int>(
            std::clamp<long long>(int_param(req, "limit").value_or(50), 1, kMaxPage));
        send_json(res, 200, views_.jobs(session_of(req).op, q));
    });

    s.Get(R"(/api/jobs/(\d+))",
          [this, session_of](const httplib::Request& req, httplib::Response& res) {
              const auto id = path_id(req.matches[1].str());
              const auto j = views_.job(session_of(req).op, id, clock_.now());
              send_found(res, j, 404, "no such job");
          });

    s.Get(R"(/api/jobs/(\d+)/workflow)",
          [this, session_of](const httplib::Request& req, httplib::Response& res) {
              const auto w = views_.workflow(session_of(req).op, path_id(req.matches[1].str()));
              send_found(res, w, 404, "no such job");
          });

    s.Get("/api/quarantine",
          [this, session_of](const httplib::Request& req, httplib::Response& res) {
              send_json(res, 200, views_.quarantine(session_of(req).op));
          });

    // Every action: the reason first (400 without one), then `take` as the signed-in operator;
    // what was asked and its result are logged under the operator's name.
    auto act = [session_of](const httplib::Request& req, httplib::Response& res,
                            const std::string& what, const auto& take) {
        const auto reason = reason_of(req, res);
        if (!reason) return;
        const auto op = session_of(req).op;
        const ActionResult r = take(op, *reason);
        spdlog::info("console: {} asked to {}: {}", base::printable(op.name), what, r.body.dump());
        send_action(res, r);
    };

    auto resolve = [this, act](bool release) {
        return [this, act, release](const httplib::Request& req, httplib::Response& res) {
            const auto id = path_id(req.matches[1].str());
            const auto what =
                fmt::format("{} quarantined job {}", release ? "release" : "fail", id);
            act(req, res, what, [&](const Operator& op, const std::string& reason) {
                return views_.resolve_quarantined(op, id, release, reason, clock_.now());
            });
        };
    };
    s.Post(R"(/api/quarantine/(\d+)/release)", resolve(true));
    s.Post(R"(/api/quarantine/(\d+)/fail)", resolve(false));

    auto job_action = [this, act](bool cancel) {
        return [this, act, cancel](const httplib::Request& req, httplib::Response& res) {
            const auto id = path_id(req.matches[1].str());
            const auto what = fmt::format("{} job {}", cancel ? "cancel" : "retry", id);
            act(req, res, what, [&](const Operator& op, const std::string& reason) {
                const auto now = clock_.now();
                return cancel ? views_.cancel(op, id, reason, now)
                              : views_.retry(op, id, reason, now);
            });
        };
    };
    s.Post(R"(/api/jobs/(\d+)/cancel)", job_action(true));
    s.Post(R"(/api/jobs/(\d+)/retry)", job_action(false));

    auto queue_action = [this, act](bool paused) {
        return [this, act, paused](const httplib::Request& req, httplib::Response& res) {
            const auto org = path_id(req.matches[1].str());
            const auto queue = req.matches[2].str();
            const auto what = fmt::format("{} queue {} of organization {}",
                                          paused ? "pause" : "resume", queue, org);
            act(req, res, what, [&](const Operator& op, const std::string& reason) {
                return views_.pause(op, org, queue, paused, reason);
            });
        };
    };
    // The pattern is the queue name's own rule (schema/baseline/tables.sql), so nothing else
    // reaches the store.
    s.Post(R"(/api/queues/(\d+)/([A-Za-z0-9][A-Za-z0-9_.:-]{0,63})/pause)", queue_action(true));
    s.Post(R"(/api/queues/(\d+)/([A-Za-z0-9][A-Za-z0-9_.:-]{0,63})/resume)", queue_action(false));

    auto resolve_lease = [this, act](bool release) {
        return [this, act, release](const httplib::Request& req, httplib::Response& res) {
            const auto id = path_id(req.matches[1].str());
            const auto body = base::parse_bounded_json_or_discarded(req.body);
            if (!body.is_object() || !body.contains("generation") ||
                !body["generation"].is_number_integer()) {
                send_json(res, 400, {{"error", "the generation the page shows is required"}});
                return;
            }
            const auto seen = body["generation"].get<long long>();
            const auto what =
                fmt::format("{} the assignment of job {}", release ? "release" : "fail", id);
            act(req, res, what, [&](const Operator& op, const std::string& reason) {
                return views_.resolve_lease(op, id, seen, release, reason, clock_.now());
            });
        };
    };
    s.Post(R"(/api/leases/(\d+)/release)", resolve_lease(true));
    s.Post(R"(/api/leases/(\d+)/fail)", resolve_lease(false));

    s.Get("/api/drills", [this, session_of](const httplib::Request& req, httplib::Response& res) {
        send_json(res, 200, views_.drills(session_of(req).op));
    });

    s.Post("/api/check", [this, session_of](const httplib::Request& req, httplib::Response& res) {
        const auto r = views_.run_check(session_of(req).op, clock_.now());
        send_found(res, r, 403, "the check reads every organization");
    });

    s.Get(R"(/reports/(.+))",
          [this, session_of](const httplib::Request& req, httplib::Response& res) {
              const auto path = req.matches[1].str();
              const auto bytes = views_.report(session_of(req).op, path);
              if (!bytes) {
                  res.status = 404;
                  return;
              }
              res.set_content(*bytes, content_type_of(path).c_str());
              // A report is data: even opened on its own, an SVG may not run script.
              res.headers.erase("Content-Security-Policy");
              res.set_header("Content-Security-Policy",
                             "default-src 'none'; style-src 'unsafe-inline'; "
                             "sandbox; frame-ancestors 'none'");
          });
}

}  // namespace aclaim::console
