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

Listener::Listener(const Connections& connections, Mailbox& mailbox,
                   std::function<void()> on_schedule)
    : connections_(connections), mailbox_(mailbox), on_schedule_(std::move(on_schedule)) {}

Listener::~Listener() {
    stop();
}

void Listener::start() {
    struct Session {
        std::optional<Poster> poster;
        common::Backoff backoff;
        std::shared_ptr<StatementWatchdog::Watch> watch;
    };
    auto session = std::make_shared<Session>();
    session->watch = connections_.watch("aclaim-coordinator-listener");
    task_.start(common::PeriodicTask::Wait{0}, [this, session]() -> common::PeriodicTask::Wait {
        if (!session->poster) session->poster.emplace(mailbox_);
        try {
            listen_once(*session->poster, session->backoff, *session->watch);
        } catch (const std::exception& e) {
            if (!down_reported_) {
                spdlog::warn("listener: lost {} ({}); reconnecting with backoff",
                             Listener::kChannel, e.what());
            }
            down_reported_ = true;
            return session->backoff.next();
        }
        return common::PeriodicTask::Wait{0};
    });
}

void Listener::stop() {
    task_.stop();
}

void Listener::listen_once(Poster& poster, common::Backoff& backoff,
                           StatementWatchdog::Watch& watch) {
    const auto owned = connections_.open("aclaim-coordinator-listener", Connections::Role::Login);
    pqxx::connection& conn = *owned;
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
    const common::Clock& clock = connections_.watchdog().clock();
    auto next_ping = clock.monotonic_now() + kPingEvery;
    while (!task_.stopping()) {
        conn.await_notification(0, kWaitStepMicros);
        if (clock.monotonic_now() >= next_ping) {
            ArmedWatch armed(watch, conn.sock(), connections_.deadline_from_now());
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
