#include "coordinator/db/listener.hpp"

#include <spdlog/spdlog.h>

#include <pqxx/pqxx>
#include <string_view>

#include "common/base/backoff.hpp"
#include "coordinator/db/db_sql.hpp"

namespace aclaim::coordinator {

namespace {

using Channel = NotificationCounters::Channel;
static_assert(NotificationCounters::kChannels(Channel::Jobs) ==
              std::string_view(Listener::kChannel));
static_assert(NotificationCounters::kChannels(Channel::Schedule) ==
              std::string_view(Listener::kScheduleChannel));
static_assert(NotificationCounters::kChannels(Channel::Revoke) ==
              std::string_view(Listener::kRevokeChannel));

/// How long one wait for a notification lasts: bounds how late a stop is noticed.
constexpr long kWaitStepMicros = 100'000;

/// Hears one channel (`channel` names it in NotificationCounters::kChannels): a payload `parse`
/// reads goes to `act` with what it read; any other is dropped as forged, `expected` saying what a
/// payload of the channel looks like.
template <typename Parse, typename Act>
class Receiver final : public pqxx::notification_receiver {
  public:
    Receiver(pqxx::connection_base& conn, Channel channel, const char* expected,
             Forgeries& forgeries, Parse parse, Act act)
        : pqxx::notification_receiver(conn, std::string(NotificationCounters::kChannels(channel))),
          channel_(channel),
          expected_(expected),
          forgeries_(forgeries),
          parse_(std::move(parse)),
          act_(std::move(act)) {}

    void operator()(const std::string& payload, int) override {
        auto heard = parse_(payload);
        if (!heard) {
            forgeries_.drop(channel_, payload, expected_);
            return;
        }
        act_(std::move(*heard), payload);
    }

  private:
    Channel channel_;
    const char* expected_;
    Forgeries& forgeries_;
    Parse parse_;
    Act act_;
};

template <typename Parse, typename Act>
Receiver(pqxx::connection_base&, Channel, const char*, Forgeries&, Parse, Act)
    -> Receiver<Parse, Act>;

}  // namespace

Listener::Listener(const Connections& connections, Mailbox& mailbox, NotificationCounters& counters,
                   std::function<void()> on_schedule)
    : connections_(connections),
      mailbox_(mailbox),
      forgeries_(counters),
      revokes_(counters, forgeries_),
      on_schedule_(std::move(on_schedule)) {}

void Listener::start() {
    struct Session {
        std::optional<Poster> poster;
        base::Backoff backoff;
        std::shared_ptr<StatementWatchdog::Watch> watch;
    };
    auto session = std::make_shared<Session>();
    session->watch = connections_.watch("aclaim-coordinator-listener");
    task_.start(base::PeriodicTask::Wait{0}, [this, session]() -> base::PeriodicTask::Wait {
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
        return base::PeriodicTask::Wait{0};
    });
}

void Listener::listen_once(Poster& poster, base::Backoff& backoff,
                           StatementWatchdog::Watch& watch) {
    // Acting as the row-security role (every organization in scope) when row security is on: the
    // revoke check reads jobs, each row by its organization and id.
    const auto owned =
        connections_.open("aclaim-coordinator-listener", Connections::Role::RowSecurity);
    pqxx::connection& conn = *owned;
    RevokeChecks::prepare(conn);
    Receiver jobs(conn, Channel::Jobs, "not \"org\" or \"org:queue\"", forgeries_, parse_wake,
                  [&poster](OrgWoken woken, const std::string&) { poster.post(std::move(woken)); });
    Receiver schedule(
        conn, Channel::Schedule, "not a time in microseconds", forgeries_,
        [](const std::string& payload) {
            return valid_schedule_payload(payload) ? std::optional<bool>(true) : std::nullopt;
        },
        [this](bool, const std::string&) {
            if (on_schedule_) on_schedule_();
        });
    // Collected for one check against the rows after the wait (a statement cannot run while
    // libpqxx delivers notifications).
    Receiver revoke(conn, Channel::Revoke, "not \"org:job:generation:cancelled:worker\"",
                    forgeries_, parse_revoke,
                    [this](RevokeClaim claim, const std::string& payload) {
                        revokes_.add(std::move(claim), payload);
                    });
    const int pid = conn.backendpid();
    spdlog::info("listener: listening on {}, {} and {}", Listener::kChannel,
                 Listener::kScheduleChannel, Listener::kRevokeChannel);
    backoff.reset();
    down_reported_ = false;
    poster.post(ListenerReady{});
    if (on_schedule_) on_schedule_();
    const base::Clock& clock = connections_.watchdog().clock();
    auto next_ping = clock.monotonic_now() + kPingEvery;
    // Heard on the connection before this one and not checked when it was lost.
    if (!revokes_.empty()) revokes_.check(conn, connections_, watch, poster);
    while (!task_.stopping()) {
        conn.await_notification(0, kWaitStepMicros);
        // Everything one wait delivered is checked in one statement: a genuine revocation waits
        // for one primary-key read per batch, and a spray costs a statement per batch, not per
        // notification.
        if (!revokes_.empty()) revokes_.check(conn, connections_, watch, poster);
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
