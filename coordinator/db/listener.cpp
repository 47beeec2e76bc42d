#include "coordinator/db/listener.hpp"

#include <spdlog/spdlog.h>

#include <charconv>
#include <pqxx/pqxx>

#include "common/base/backoff.hpp"

namespace aclaim::coordinator {

namespace {

/// How long one wait for a notification lasts: bounds how late a stop is noticed.
constexpr long kWaitStepMicros = 100'000;

class JobsReceiver final : public pqxx::notification_receiver {
  public:
    JobsReceiver(pqxx::connection_base& conn, Poster& poster)
        : pqxx::notification_receiver(conn, Listener::kChannel), poster_(poster) {}

    void operator()(const std::string& payload, int) override {
        common::OrgId org = 0;
        const char* last = payload.data() + payload.size();
        const auto [end, ec] = std::from_chars(payload.data(), last, org);
        if (ec != std::errc() || end != last || org <= 0) {
            spdlog::warn("ignoring notification on {} with payload '{}'", Listener::kChannel,
                         payload);
            return;
        }
        poster_.post(OrgWoken{org});
    }

  private:
    Poster& poster_;
};

}  // namespace

Listener::Listener(std::string dsn, Mailbox& mailbox, StatementWatchdog& watchdog,
                   std::chrono::milliseconds deadline)
    : dsn_(std::move(dsn)), mailbox_(mailbox), watchdog_(watchdog), deadline_(deadline) {}

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
    const int pid = conn.backendpid();
    spdlog::info("listener: listening on {}", Listener::kChannel);
    backoff.reset();
    down_reported_ = false;
    poster.post(ListenerReady{});
    const common::Clock& clock = watchdog_.clock();
    auto next_ping = clock.monotonic_now() + kPingEvery;
    while (!stop_.load()) {
        conn.await_notification(0, kWaitStepMicros);
        if (clock.monotonic_now() >= next_ping) {
            ArmedWatch armed(watch, conn.sock(), clock.monotonic_now() + deadline_);
            pqxx::nontransaction ping(conn);
            ping.exec("SELECT 1");
            if (armed.release()) throw pqxx::broken_connection("listener ping passed its deadline");
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
