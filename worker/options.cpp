#include "worker/options.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include <CLI/CLI.hpp>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/base/cell_map.hpp"
#include "common/base/cli_flags.hpp"
#include "common/proto/version.hpp"

namespace aclaim::worker {

namespace {

/// The command line and what it parses into; finish() turns it into options.
struct Parser {
    CLI::App app{"aclaim-worker: a simulated reviewer that claims, renews and completes jobs"};
    WorkerOptions o;
    std::vector<std::string> connect{"tcp://127.0.0.1:5555"};
    CLI::Option* connect_opt = nullptr;
    std::string cells;
    std::string dist = "fixed";
    std::string encoding = "binary";
    std::int64_t review_ms = o.review_mean.count();
    std::int64_t stall_ms = 0;
    std::int64_t idle_exit_ms = 0;
    std::int64_t reply_timeout_ms = o.client.reply_timeout.count();
    std::int64_t silence_timeout_ms = o.client.silence_timeout.count();
    std::string secret_key_file;

    Parser();
    WorkerOptions finish();
};

Parser::Parser() {
    o.client.worker_id = "worker-" + std::to_string(::getpid());
    app.set_version_flag("--version", proto::version_line("aclaim-worker"));
    connect_opt = app.add_option("--connect", connect,
                                 "Coordinator endpoints, comma-separated: the worker fails over "
                                 "between them")
                      ->delimiter(',')
                      ->envname("ACLAIM_CONNECT")
                      ->capture_default_str();
    app.add_option("--cells", cells,
                   "Cell map (JSON): connect to the coordinators of --org's cell instead of "
                   "--connect")
        ->envname("ACLAIM_CELLS");
    base::add_org(app, o.client.org_id, "Organization (used by a plaintext coordinator)")
        ->envname("ACLAIM_ORG");
    app.add_option("--queues", o.client.queues,
                   "Queues served, comma-separated (the worker's skills); default: 'default'")
        ->delimiter(',')
        ->envname("ACLAIM_QUEUES");
    app.add_option("--id", o.client.worker_id, "Worker identity, recorded as the assignee")
        ->envname("ACLAIM_WORKER_ID")
        ->capture_default_str();
    app.add_option("--review-ms", review_ms, "Mean simulated review time")
        ->envname("ACLAIM_REVIEW_MS")
        ->check(CLI::Range(std::int64_t{0}, std::int64_t{86'400'000}))
        ->capture_default_str();
    app.add_option("--review-dist", dist, "Review time distribution")
        ->envname("ACLAIM_REVIEW_DIST")
        ->check(CLI::IsMember({"fixed", "uniform", "lognormal"}))
        ->capture_default_str();
    app.add_option("--jobs", o.jobs, "Exit 0 after this many accepted completions (0: no limit)")
        ->envname("ACLAIM_WORKER_JOBS")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--concurrency", o.concurrency, "Jobs held at once")
        ->envname("ACLAIM_CONCURRENCY")
        ->check(CLI::Range(1, proto::kMaxClaimJobs))
        ->capture_default_str();
    app.add_option("--claim-wait-ms", o.claim_wait_ms, "Long-poll budget of each claim")
        ->envname("ACLAIM_CLAIM_WAIT_MS")
        ->check(CLI::Range(0, proto::kMaxClaimWaitMs))
        ->capture_default_str();
    app.add_option("--idle-exit-ms", idle_exit_ms,
                   "With --jobs 0: exit 0 after this long without work (0: never)")
        ->envname("ACLAIM_IDLE_EXIT_MS")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--poison", o.poison,
                   "A payload that kills the worker (SIGKILL mid-review) whenever it takes it")
        ->envname("ACLAIM_POISON");
    app.add_option("--crash-after", o.crash_after,
                   "After K accepted completions, claim one more job and SIGKILL itself mid-review")
        ->envname("ACLAIM_CRASH_AFTER")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--stall-ms", stall_ms,
                   "First job: stop heartbeating for this long, then try to complete anyway")
        ->envname("ACLAIM_STALL_MS")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--checkpoint-steps", o.checkpoint_steps,
                   "Review in this many steps, saving a checkpoint after each, and resume a job "
                   "from the checkpoint its last holder saved (0: off)")
        ->envname("ACLAIM_CHECKPOINT_STEPS")
        ->check(CLI::Range(0, 100))
        ->capture_default_str();
    app.add_option("--fail-rate", o.fail_rate, "Probability of a retryable FAIL per review")
        ->envname("ACLAIM_FAIL_RATE")
        ->check(CLI::Range(0.0, 1.0));
    app.add_option("--park-every", o.park_every,
                   "Park every Nth review instead of completing it (protocol 1.6), writing its "
                   "callback token to --result-file for the outside completion (0: off)")
        ->envname("ACLAIM_PARK_EVERY")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--park-timeout-ms", o.park_timeout_ms,
                   "With --park-every: how long a parked job waits for its callback")
        ->envname("ACLAIM_PARK_TIMEOUT_MS")
        ->check(CLI::Range(std::int64_t{1}, proto::kMaxParkTimeoutMs))
        ->capture_default_str();
    app.add_option("--encoding", encoding, "Body encoding on the wire")
        ->envname("ACLAIM_ENCODING")
        ->check(CLI::IsMember({"binary", "json"}))
        ->capture_default_str();
    app.add_option("--reply-timeout-ms", reply_timeout_ms,
                   "Fail over when a request goes unanswered this long (beyond a claim's wait)")
        ->envname("ACLAIM_REPLY_TIMEOUT_MS")
        ->check(CLI::Range(std::int64_t{100}, std::int64_t{600'000}))
        ->capture_default_str();
    app.add_option("--silence-timeout-ms", silence_timeout_ms,
                   "Fail over when the coordinator's end of the connection answers nothing, not "
                   "even the transport's PINGs, this long")
        ->envname("ACLAIM_SILENCE_TIMEOUT_MS")
        ->check(CLI::Range(std::int64_t{300}, std::int64_t{600'000}))
        ->capture_default_str();
    app.add_option("--curve-server-key", o.client.curve.server_public,
                   "Coordinator's CURVE public key (Z85); enables CURVE")
        ->envname("ACLAIM_CURVE_SERVER_KEY");
    app.add_option("--curve-public-key", o.client.curve.client_public,
                   "This worker's CURVE public key (Z85)")
        ->envname("ACLAIM_CURVE_PUBLIC_KEY");
    app.add_option("--curve-secret-key", o.client.curve.client_secret,
                   "This worker's CURVE secret key (Z85); prefer "
                   "--curve-secret-key-file, which ps does not show")
        ->envname("ACLAIM_CURVE_SECRET_KEY");
    app.add_option("--curve-secret-key-file", secret_key_file,
                   "File holding this worker's CURVE secret key (first line, Z85; mode 0600); "
                   "the public key is derived from it")
        ->envname("ACLAIM_CURVE_SECRET_KEY_FILE");
    app.add_option("--result-file", o.result_file, "Append one JSON line per verdict to this file")
        ->envname("ACLAIM_RESULT_FILE");
    app.add_option("--log-level", o.log_level, "trace, debug, info, warn, error, critical, off")
        ->envname("ACLAIM_LOG_LEVEL")
        ->capture_default_str();
}

/// The secret key of `path`: its first line, from a regular file that neither its group nor
/// others may read (a key others can read is no longer this worker's alone). The mode is read
/// from the open descriptor, so the file checked is the file read.
std::string read_secret_key_file(const std::string& path) {
    const char* flag = "--curve-secret-key-file";
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        throw CLI::ValidationError(flag, "cannot read " + path + ": " + std::strerror(errno));
    struct ::stat st {};
    std::string text;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        throw CLI::ValidationError(flag, path + " is not a regular file");
    }
    if ((st.st_mode & 077) != 0) {
        ::close(fd);
        char mode[8];
        std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
        throw CLI::ValidationError(
            flag, path + " is readable by its group or others (mode " + mode + "): chmod 600 it");
    }
    std::array<char, 256> buf{};
    for (;;) {
        const auto n = ::read(fd, buf.data(), buf.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        text.append(buf.data(), static_cast<std::size_t>(n));
        if (text.size() > 4096) break;  // a key file is one short line
    }
    ::close(fd);
    text = text.substr(0, text.find('\n'));
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
    if (text.size() != 40) {
        throw CLI::ValidationError(flag, path +
                                             " does not hold a CURVE secret key (40 characters "
                                             "of Z85 on its first line)");
    }
    return text;
}

WorkerOptions Parser::finish() {
    if (!secret_key_file.empty()) {
        if (!o.client.curve.client_secret.empty()) {
            throw CLI::ValidationError("--curve-secret-key-file",
                                       "excludes --curve-secret-key (ACLAIM_CURVE_SECRET_KEY): "
                                       "give the key once");
        }
        o.client.curve.client_secret = read_secret_key_file(secret_key_file);
        std::array<char, 41> derived{};
        if (::zmq_curve_public(derived.data(), o.client.curve.client_secret.c_str()) != 0) {
            throw CLI::ValidationError("--curve-secret-key-file",
                                       secret_key_file + " does not hold a Z85 CURVE secret key");
        }
        if (o.client.curve.client_public.empty()) {
            o.client.curve.client_public = derived.data();
        } else if (o.client.curve.client_public != derived.data()) {
            throw CLI::ValidationError("--curve-public-key",
                                       "is not the public key of the secret in " + secret_key_file);
        }
    }
    if (o.client.worker_id.empty() || o.client.worker_id.size() > proto::kMaxWorkerIdBytes)
        throw CLI::ValidationError("--id", "must be 1..128 bytes");
    if (o.client.curve.enabled() &&
        (o.client.curve.client_public.empty() || o.client.curve.client_secret.empty()))
        throw CLI::ValidationError("--curve-server-key",
                                   "needs --curve-secret-key-file (or --curve-public-key and "
                                   "--curve-secret-key) too");
    if (!cells.empty() && connect_opt->count() > 0)
        throw CLI::ValidationError("--cells", "excludes --connect: the map names the endpoints");
    if (!cells.empty()) {
        // Under CURVE the coordinator takes the organization from the key; the map still needs
        // it to know which cell's coordinators to ask.
        if (o.client.org_id < 1)
            throw CLI::ValidationError("--cells", "needs --org, to find the organization's cell");
        try {
            const auto map = base::CellMap::load(cells);
            o.client.endpoints = map.require_cell_of(o.client.org_id).coordinators;
        } catch (const base::CellMapError& e) {
            throw CLI::ValidationError("--cells", e.what());
        }
    } else {
        o.client.endpoints.clear();
        for (auto& e : connect) {
            if (e.empty()) continue;
            if (e.find("://") == std::string::npos)
                throw CLI::ValidationError(
                    "--connect", "'" + e + "' is not an endpoint such as tcp://host:5555");
            o.client.endpoints.push_back(e);
        }
        if (o.client.endpoints.empty())
            throw CLI::ValidationError("--connect", "names no endpoint");
    }
    if (o.park_every > 0 && o.result_file.empty()) {
        throw CLI::ValidationError("--park-every",
                                   "needs --result-file: each park's callback token is written "
                                   "there, and nowhere else");
    }
    o.client.park = o.park_every > 0;
    o.client.silence_timeout = Millis(silence_timeout_ms);
    o.review_mean = Millis(review_ms);
    o.review_dist = *parse_review_dist(dist);
    o.stall = Millis(stall_ms);
    o.idle_exit = Millis(idle_exit_ms);
    o.client.reply_timeout = Millis(reply_timeout_ms);
    o.client.encoding = encoding == "json" ? proto::Encoding::Json : proto::Encoding::Binary;
    return o;
}

}  // namespace

WorkerOptions parse_options_or_throw(int argc, const char* const* argv) {
    Parser p;
    p.app.parse(argc, argv);
    return p.finish();
}

WorkerOptions parse_options(int argc, char** argv) {
    Parser p;
    try {
        p.app.parse(argc, argv);
        return p.finish();
    } catch (const CLI::ParseError& e) {
        std::exit(base::parse_error_exit(p.app, "aclaim-worker", e, argc, argv));
    }
}

}  // namespace aclaim::worker
