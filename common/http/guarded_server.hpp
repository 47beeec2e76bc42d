#pragma once

// An HTTP server that a slow or hostile client cannot hold, on cpp-httplib.
//
// httplib alone hands every accepted connection to a pool thread at once and bounds each read on
// its own, so a client that sends one header line every few seconds keeps its thread for as long
// as it likes, and a handful of such clients silence every endpoint (liveness probes included).
// Here a connection reaches a thread only once its whole request, head and declared body, is in
// the socket's buffer: one poll thread watches every arriving connection at once and cuts the
// request off at a deadline for the whole of it (408), not per read. The response must be written
// within a deadline of its own. Requests the owner calls light (probes, static pages: answered
// from memory) have threads of their own, so they are answered even while slow handlers occupy
// every other thread. One request per connection: no idle keep-alive connection holds a thread.

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

namespace aclaim::http {

struct HttpGuardOptions {
    /// The whole request, head and body, must arrive within this of the connection's accept;
    /// then it is answered 408 and closed, however steadily the bytes were trickling in.
    std::chrono::milliseconds request_deadline{5000};
    /// The whole response must be written within this from its first byte; then it is cut.
    std::chrono::milliseconds write_deadline{5000};
    /// A request head (request line and headers) larger than this is answered 431.
    std::size_t max_head_bytes = std::size_t{16} * 1024;
    /// A declared body larger than this is never read: the server answers 413.
    std::size_t max_body_bytes = std::size_t{64} * 1024;
    /// Connections whose request is still arriving; past this the one waiting longest is closed,
    /// so that a flood of idle connections cannot keep a probe's out.
    std::size_t max_arriving = 256;
    /// Threads that serve light requests, and threads that serve every other.
    std::size_t light_threads = 2;
    std::size_t threads = 4;
    /// Connections the kernel may hold before they are accepted. httplib listens with 5, and a
    /// burst of clients (slow ones reconnecting at once) past that has its SYNs dropped, which
    /// costs a probe caught in it a second's retransmission.
    int listen_backlog = 256;
    /// Complete requests waiting for a thread, per pool; past this one is answered 503 at once.
    std::size_t max_queued = 128;
    /// Whether a request (method, path without its query) is light: answered at once from
    /// memory, never waiting on a database or a lock a slow request may hold. Empty: none is.
    std::function<bool(std::string_view method, std::string_view path)> light;
};

/// What the guard refused since start, for tests and exposition.
struct HttpGuardCounts {
    std::uint64_t timed_out = 0;   ///< requests not complete by the deadline (408)
    std::uint64_t too_large = 0;   ///< heads over max_head_bytes (431)
    std::uint64_t malformed = 0;   ///< unreadable framing: chunked bodies, bad lengths (400/411)
    std::uint64_t overloaded = 0;  ///< refused with a full queue (503)
    std::uint64_t evicted = 0;     ///< arriving connections closed to make room
};

/// An httplib::Server (routes, handlers, default headers as usual) whose connections pass the
/// guard. Use bind_to_port/bind_to_any_port, listen_after_bind and stop as with httplib; then
/// drain() (or the destructor) ends the guard's threads.
class GuardedServer : public httplib::Server {
  public:
    explicit GuardedServer(HttpGuardOptions options);
    ~GuardedServer() override;
    GuardedServer(const GuardedServer&) = delete;
    GuardedServer& operator=(const GuardedServer&) = delete;

    /// httplib's, with the listening socket's backlog raised to options.listen_backlog as soon as
    /// it is bound: clients that connect before the accept loop runs (the server thread not yet
    /// scheduled on a busy machine) wait in the kernel instead of having their SYNs dropped at
    /// httplib's backlog of 5, which costs each a second's retransmission.
    bool bind_to_port(const std::string& host, int port, int socket_flags = 0);
    int bind_to_any_port(const std::string& host, int socket_flags = 0);
    /// httplib's, with the listening socket's backlog raised to options.listen_backlog first.
    bool listen_after_bind();
    /// Whether listen_after_bind has set the socket's backlog. A thread that reads true is
    /// ordered after that use of the socket: stop() closes it, and the library's own ordering
    /// of the two is not visible to ThreadSanitizer.
    bool listened() const { return listened_.load(std::memory_order_acquire); }

    /// Closes the connections still arriving and those queued, lets the requests being served
    /// finish, joins the guard's threads. Call after stop(); idempotent.
    void drain();

    HttpGuardCounts counts() const;
    /// Complete requests waiting for a thread now, in both pools.
    std::size_t queued();

  private:
    /// Sets the bound socket's backlog to options.listen_backlog.
    void raise_backlog();
    /// A connection whose request has fully arrived, waiting for a thread.
    struct Ready {
        int sock = -1;
        std::chrono::steady_clock::time_point read_by;
        /// Bytes the stream may read: the head and the declared body (just the head when the
        /// body is refused, so that httplib answers 413 without waiting for it).
        std::size_t readable = 0;
    };
    /// Arriving connections, as the poll thread tracks them.
    struct Arriving {
        int sock = -1;
        std::chrono::steady_clock::time_point read_by;
        std::size_t head = 0;  ///< the head's length once its end was seen
        std::size_t need = 0;  ///< head and body: what must be buffered before dispatch
        std::size_t readable = 0;
        bool light = false;
        bool expect_continue = false;
        bool continue_sent = false;
        int low_water = 1;
    };
    enum class Verdict { Wait, Dispatch, Drop };
    struct Pool {
        std::vector<std::thread> threads;
        std::deque<Ready> queue;
        std::mutex mutex;
        std::condition_variable wake;
        bool stopping = false;
    };

    // httplib calls this on its accept thread (the task queue runs it inline): the connection
    // goes to the poll thread, which holds no pool thread while the request arrives.
    bool process_and_close_socket(socket_t sock) override;

    void watch();
    Verdict inspect(Arriving& a);
    /// Answers `status` ("408 Request Timeout") and closes, without waiting for the client.
    void refuse(int sock, std::string_view status);
    void dispatch(const Arriving& a);
    void work(Pool& pool);
    void serve(const Ready& r);

    HttpGuardOptions options_;
    int wake_fd_ = -1;
    std::mutex inbox_mutex_;
    std::vector<int> inbox_;
    bool stopping_ = false;
    std::vector<Arriving> arriving_;  ///< the poll thread's alone
    std::vector<char> peek_;          ///< the poll thread's alone
    Pool light_;
    Pool general_;
    std::thread watcher_;
    std::once_flag drained_;
    std::atomic<std::uint64_t> timed_out_{0};
    std::atomic<std::uint64_t> too_large_{0};
    std::atomic<std::uint64_t> malformed_{0};
    std::atomic<std::uint64_t> overloaded_{0};
    std::atomic<std::uint64_t> evicted_{0};
    std::atomic<bool> listened_{false};
};

}  // namespace aclaim::http
