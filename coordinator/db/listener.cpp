#include "coordinator/db/listener.hpp"

#include <spdlog/spdlog.h>

#include <array>
#include <charconv>
#include <optional>
#include <pqxx/pqxx>
#include <string_view>

#include "common/base/backoff.hpp"
#include "common/base/queue_name.hpp"
#include "coordinator/db/db_sql.hpp"

namespace aclaim::coordinator {

namespace {

/// A positive decimal id, or nothing.
std::optional<std::int64_t> parse_id(std::string_view text) {
    std::int64_t id = 0;
    const char* last = text.data() + text.size();
    const auto [end, ec] = std::from_chars(text.data(), last, id);
    if (ec != std::errc() || end != last || id <= 0) return std::nullopt;
    return id;
}

/// How long one wait for a notification lasts: bounds how late a stop is noticed.
constexpr long kWaitStepMicros = 100'000;

class JobsReceiver final : public pqxx::notification_receiver {
  public:
    JobsReceiver(pqxx::connection_base& conn, Poster& poster)
        : pqxx::notification_receiver(conn, Listener::kChannel), poster_(poster) {}

    void operator()(const std::string& payload, int) override {
        const std::string_view text(payload);
        const auto colon = text.find(':');
        const auto org = parse_id(text.substr(0, colon));
        const std::string_view queue =
            colon == std::string_view::npos ? std::string_view() : text.substr(colon + 1);
        if (!org || (colon != std::string_view::npos && !common::valid_queue_name(queue))) {
            spdlog::warn("ignoring notification on {} with payload '{}'", Listener::kChannel,
                         payload);
            return;
        }
        poster_.post(OrgWoken{*org, std::string(queue)});
    }

  private:
    Poster& poster_;
};

class ScheduleReceiver final : public pqxx::notification_receiver {
  public:
    ScheduleReceiver(pqxx::connection_base& conn, const std::function<void()>& on_schedule)
        : pqxx::notification_receiver(conn, Listener::kScheduleChannel),
          on_schedule_(on_schedule) {}

    void operator()(const std::string&, int) override {
        if (on_schedule_) on_schedule_();
    }

  private:
    const std::function<void()>& on_schedule_;
};

class RevokeReceiver final : public pqxx::notification_receiver {
  public:
    RevokeReceiver(pqxx::connection_base& conn, Poster& poster)
        : pqxx::notification_receiver(conn, Listener::kRevokeChannel), poster_(poster) {}

    void operator()(const std::string& payload, int) override {
        // org:job:generation:reason:worker; the worker name is last, as it may hold ':'.
        std::string_view rest(payload);
        std::array<std::string_view, 4> fields;
        bool ok = true;
        for (auto& f : fields) {
            const auto colon = rest.find(':');
            if (colon == std::string_view::npos) {
                ok = false;
                break;
            }
            f = rest.substr(0, colon);
            rest.remove_prefix(colon + 1);
        }
        const auto org = ok ? parse_id(fields[0]) : std::nullopt;
        const auto job = ok ? parse_id(fields[1]) : std::nullopt;
        const auto generation = ok ? parse_id(fields[2]) : std::nullopt;
        if (!org || !job || !generation || rest.empty()) {
            spdlog::warn("ignoring notification on {} with payload '{}'", Listener::kRevokeChannel,
                         payload);
            return;
        }
        common::Reclaimed r;
        r.org_id = *org;
        r.job_id = *job;
        r.generation = *generation;
        r.reason = std::string(fields[3]);
        r.assignee = std::string(rest);
        r.state = common::JobState::Cancelled;
        poster_.post(std::move(r));
    }

  private:
    Poster& poster_;
};

}  // namespace

Listener::Listener(std::string dsn, Mailbox& mailbox, StatementWatchdog& watchdog,
                   std::chrono::milliseconds deadline, std::function<void()> on_schedule)
    : dsn_(std::move(dsn)),
      mailbox_(mailbox),
      watchdog_(watchdog),
      deadline_(deadline),
      on_schedule_(std::move(on_schedule)) {}

Listener::~Listener() {
    stop();
}

void Listener::start() {
    thread_ = std::thread([this] { run(); });
}

void Listener::stop() {
    {
        std::lock_guard lock(pause_mutex_);
        stop_.store(true);
    }
    pause_wake_.notify_all();
    if (thread_.joinable()) thread_.join();
}

void Listener::pause(std::chrono::milliseconds d) const {
    std::unique_lock lock(pause_mutex_);
    pause_wake_.wait_for(lock, d, [this] { return stop_.load(); });
}

void Listener::run() {
    Poster poster(mailbox_);
    common::Backoff backoff;
    const auto watch = watchdog_.watch("aclaim-coordinator-listener");
    while (!stop_.load()) {
        try {
            listen_once(poster, backoff, *watch);
        } catch (const std::exception& e) {
            if (!down_reported_) {
                spdlog::warn("listener: lost {} ({}); reconnecting with backoff",
                             Listener::kChannel, e.what());
            }
            down_reported_ = true;
            pause(backoff.next());
        }
    }
}

void Listener::listen_once(Poster& poster, common::Backoff& backoff,
                           StatementWatchdog::Watch& watch) {
    pqxx::connection conn(dsn_);
    {
        pqxx::nontransaction session(conn);
        session.exec("SET application_name = 'aclaim-coordinator-listener'");
    }
    JobsReceiver receiver(conn, poster);
    ScheduleReceiver schedule(conn, on_schedule_);
    RevokeReceiver revoke(conn, poster);
    const int pid = conn.backendpid();
    spdlog::info("listener: listening on {}, {} and {}", Listener::kChannel,
                 Listener::kScheduleChannel, Listener::kRevokeChannel);
    backoff.reset();
    down_reported_ = false;
    poster.post(ListenerReady{});
    if (on_schedule_) on_schedule_();
    const common::Clock& clock = watchdog_.clock();
    auto next_ping = clock.monotonic_now() + kPingEvery;
    while (!stop_.load()) {
        conn.await_notification(0, kWaitStepMicros);
        if (clock.monotonic_now() >= next_ping) {
            ArmedWatch armed(watch, conn.sock(), clock.monotonic_now() + deadline_);
            pqxx::nontransaction ping(conn);
            // Writable, or no longer the primary: a standby's or a fenced primary's session
            // hears no notification the new primary sends.
            const bool writable = ping.exec1(sql::kListenerWritable)[0].as<bool>();
            if (armed.release()) throw pqxx::broken_connection("listener ping passed its deadline");
            if (!writable) {
                throw pqxx::broken_connection("the listener's server is no longer writable");
            }
            next_ping = clock.monotonic_now() + kPingEvery;
        }
        // libpqxx may reconnect behind our back; a new backend did not hear what was sent before
        // it started listening, so treat it like any reconnection.
        if (conn.backendpid() != pid) {
            throw pqxx::broken_connection("listener connection was replaced");
        }
    }
}

}  // namespace aclaim::coordinator
