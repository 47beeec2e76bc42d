// aclaim-bench SUBCOMMAND ...: one bounded measurement, printed as one JSON object.

#include <CLI/CLI.hpp>
#include <iostream>

#include "common/base/program.hpp"
#include "common/proto/version.hpp"
#include "drills/bench.d/bench.hpp"

using namespace aclaim::drills;

namespace {

/// The flags every subcommand that talks to a coordinator takes.
void add_target_options(CLI::App* cmd, CoordinatorTarget& target) {
    ClientAuth& auth = target.auth;
    cmd->add_option("--endpoint", target.endpoint)->required();
    cmd->add_option("--org", target.org);
    cmd->add_flag("--plaintext", auth.plaintext,
                  "Connect without CURVE (the coordinator must run with --plaintext)");
    cmd->add_option("--curve-server-key", auth.server_key,
                    "The coordinator's CURVE public key (Z85); each client gets a key pair of "
                    "its own, registered for --org under its name");
    cmd->add_option("--dsn", auth.dsn, "PostgreSQL connection string, for the clients' keys");
}

/// The processes whose CPU time a measurement reports.
void add_cpu_options(CLI::App* cmd, CpuPids& pids) {
    cmd->add_option("--coordinator-pid", pids.coordinator,
                    "The coordinator's process id, for its CPU time per job");
    cmd->add_option("--postgres-pid", pids.postgres,
                    "The PostgreSQL postmaster's process id, for the CPU time per job of it and "
                    "its children");
}

int run(int argc, char** argv) {
    CLI::App app{"aclaim throughput, latency, scale and memory measurements (see drills/bench)"};
    app.require_subcommand(1);
    app.set_version_flag("--version", aclaim::proto::version_line("aclaim-bench"));

    RawOptions raw;
    auto* raw_cmd = app.add_subcommand("raw", "raw SQL limits with the store's statements");
    raw_cmd->add_option("--dsn", raw.dsn)->required();
    raw_cmd->add_option("--org", raw.org);
    raw_cmd->add_option("--seconds", raw.seconds);
    raw_cmd->add_option("--single-threads", raw.single_threads);
    raw_cmd->add_option("--batch-threads", raw.batch_threads);
    raw_cmd->add_option("--batch", raw.batch);
    raw_cmd->add_option("--notify-seconds", raw.notify_seconds,
                        "Also the single loop without and with a pg_notify per completion, "
                        "alternating, this long in all (0: skip)");
    add_cpu_options(raw_cmd, raw.cpu);

    FloorOptions floor;
    auto* floor_cmd = app.add_subcommand(
        "floor", "the contract's floor: the least SQL that keeps the contract, on bare tables");
    floor_cmd->add_option("--dsn", floor.dsn)->required();
    floor_cmd->add_option("--threads", floor.threads)->check(CLI::Range(1, 64));
    floor_cmd->add_option("--batch", floor.batch)->check(CLI::Range(1, 10000));
    floor_cmd->add_option("--seconds", floor.seconds)->check(CLI::PositiveNumber);
    floor_cmd->add_option("--setup-jobs", floor.setup_jobs,
                          "Create the floor's tables afresh with this many pending jobs first");
    floor_cmd
        ->add_option("--rate", floor.rate,
                     "Open loop: one-job claims arriving at this rate, timed to their commit "
                     "(--batch is then the most a transaction takes)")
        ->check(CLI::NonNegativeNumber);
    add_cpu_options(floor_cmd, floor.cpu);

    E2eOptions e2e;
    auto* e2e_cmd = app.add_subcommand("e2e", "end to end through a coordinator");
    add_target_options(e2e_cmd, e2e.target);
    e2e_cmd->add_option("--seconds", e2e.seconds);
    e2e_cmd->add_option("--clients", e2e.clients);
    e2e_cmd->add_option("--max-jobs", e2e.max_jobs)->check(CLI::Range(1, 100));
    e2e_cmd->add_option("--capacity", e2e.capacity);
    e2e_cmd->add_option("--hold-ms", e2e.hold_ms);
    add_cpu_options(e2e_cmd, e2e.cpu);

    LatencyOptions lat;
    auto* lat_cmd = app.add_subcommand("latency", "open-loop paced claim latency");
    add_target_options(lat_cmd, lat.target);
    lat_cmd->add_option("--seconds", lat.seconds);
    lat_cmd->add_option("--rate", lat.rate)->check(CLI::PositiveNumber);
    lat_cmd->add_option("--sessions", lat.sessions)->check(CLI::Range(1, 64));
    lat_cmd->add_option("--warmup-seconds", lat.warmup_seconds)->check(CLI::NonNegativeNumber);
    add_cpu_options(lat_cmd, lat.cpu);
    lat_cmd->add_option("--metrics", lat.metrics,
                        "host:port of the coordinator's /metrics, for the claim stages");

    IdleOptions idle;
    auto* idle_cmd = app.add_subcommand("idle", "idle connected workers and coordinator memory");
    add_target_options(idle_cmd, idle.target);
    idle_cmd->add_option("--workers", idle.workers);
    idle_cmd->add_option("--pid", idle.pid)->required();

    CrowdOptions crowd;
    auto* crowd_cmd = app.add_subcommand(
        "crowd", "many idle connected workers beside active ones, and a coordinator restart");
    add_target_options(crowd_cmd, crowd.target);
    crowd_cmd->add_option("--idle", crowd.idle, "Idle workers")->check(CLI::Range(1, 100000));
    crowd_cmd->add_option("--processes", crowd.processes, "Processes holding the idle workers")
        ->check(CLI::Range(1, 64));
    crowd_cmd->add_option("--active", crowd.active.clients, "Active workers")
        ->check(CLI::Range(1, 256));
    crowd_cmd
        ->add_option("--active-org", crowd.active.target.org,
                     "Organization of the active workers, with jobs")
        ->required();
    crowd_cmd->add_option("--pid", crowd.pid, "The coordinator's process id")->required();
    crowd_cmd->add_option("--metrics", crowd.metrics, "host:port of the coordinator's /metrics")
        ->required();
    crowd_cmd
        ->add_option("--new-pid-file", crowd.new_pid_file,
                     "Where the process id of the restarted coordinator appears")
        ->required();
    crowd_cmd->add_option("--steady-seconds", crowd.steady_seconds);
    crowd_cmd->add_option("--postgres-pid", crowd.active.cpu.postgres);

    CrowdIdleOptions crowd_idle;
    auto* crowd_idle_cmd =
        app.add_subcommand("crowd-idle", "idle workers of one crowd process (run by crowd)");
    add_target_options(crowd_idle_cmd, crowd_idle.target);
    crowd_idle_cmd->add_option("--count", crowd_idle.count);
    crowd_idle_cmd->add_option("--first", crowd_idle.first);

    NeighbourOptions neighbour;
    neighbour.active.clients = 16;
    auto* neighbour_cmd = app.add_subcommand(
        "neighbour", "one organization's claim latency without and with another's flood");
    add_target_options(neighbour_cmd, neighbour.active.target);
    neighbour_cmd->add_option("--active", neighbour.active.clients, "Quiet organization's workers")
        ->check(CLI::Range(1, 256));
    neighbour_cmd->add_option("--flood-org", neighbour.flood_org);
    neighbour_cmd->add_option("--flood-sessions", neighbour.flood_sessions)
        ->check(CLI::Range(0, 5000));
    neighbour_cmd->add_option("--flood-claims", neighbour.flood_claims, "CLAIMs outstanding each")
        ->check(CLI::Range(1, 64));
    neighbour_cmd->add_option("--flood-max-jobs", neighbour.flood_max_jobs)
        ->check(CLI::Range(1, 100));
    neighbour_cmd->add_option("--flood-endpoint", neighbour.flood_endpoint,
                              "Another coordinator for the flood (default: the same one)");
    neighbour_cmd->add_option("--idle", neighbour.idle_sessions, "Sessions on one key")
        ->check(CLI::Range(0, 20000));
    neighbour_cmd->add_option("--seconds", neighbour.seconds, "Each window's length")
        ->check(CLI::PositiveNumber);
    add_cpu_options(neighbour_cmd, neighbour.active.cpu);

    ScaleOptions scale;
    auto* scale_cmd = app.add_subcommand("scale", "claim cost at 10k and at 1M pending jobs");
    scale_cmd->add_option("--dsn", scale.dsn)->required();
    scale_cmd->add_option("--small", scale.small_pending);
    scale_cmd->add_option("--large", scale.large_pending);
    scale_cmd->add_option("--completed", scale.large_completed);
    scale_cmd->add_option("--claims", scale.claims);
    scale_cmd->add_option("--future", scale.future,
                          "Jobs scheduled a day ahead beside the runnable ones, over 20 queues");

    RetentionBenchOptions ret;
    auto* ret_cmd = app.add_subcommand(
        "retention", "finished jobs pushed through with retention on or off; claim cost, sizes");
    ret_cmd->add_option("--dsn", ret.dsn)->required();
    ret_cmd->add_option("--jobs", ret.jobs);
    ret_cmd->add_option("--chunk", ret.chunk)->check(CLI::PositiveNumber);
    ret_cmd->add_option("--days", ret.days)->check(CLI::PositiveNumber);
    ret_cmd->add_option("--retention", ret.retention, "true or false");
    ret_cmd->add_option("--batch", ret.batch)->check(CLI::Range(1, 10000));
    ret_cmd->add_option("--archive-after-days", ret.archive_after_days);
    ret_cmd->add_option("--archive-dir", ret.archive_dir);
    ret_cmd->add_option("--pending", ret.pending);
    ret_cmd->add_option("--claims", ret.claims);

    CLI11_PARSE(app, argc, argv);
    try {
        nlohmann::json out;
        if (*raw_cmd) out = run_raw(raw);
        if (*floor_cmd) out = run_floor(floor);
        if (*e2e_cmd) {
            e2e.target.auth.validate();
            out = run_e2e(e2e);
        }
        if (*lat_cmd) {
            lat.target.auth.validate();
            out = run_latency(lat);
        }
        if (*idle_cmd) {
            idle.target.auth.validate();
            out = run_idle(idle);
        }
        if (*crowd_cmd) {
            crowd.target.auth.validate();
            crowd.active.target.endpoint = crowd.target.endpoint;
            crowd.active.target.auth = crowd.target.auth;
            crowd.active.max_jobs = 1;
            crowd.active.capacity = 1;
            crowd.active.cpu.coordinator = crowd.pid;
            out = run_crowd(crowd);
        }
        if (*crowd_idle_cmd) {
            crowd_idle.target.auth.validate();
            return run_crowd_idle(crowd_idle);
        }
        if (*neighbour_cmd) {
            neighbour.active.target.auth.validate();
            neighbour.active.max_jobs = 1;
            neighbour.active.capacity = 1;
            out = run_neighbour(neighbour);
        }
        if (*scale_cmd) out = run_scale(scale);
        if (*ret_cmd) out = run_retention(ret);
        std::cout << out.dump() << std::endl;
    } catch (const std::exception& e) {
        std::cerr << "aclaim-bench: " << e.what() << std::endl;
        return 1;
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    return aclaim::base::run_program("aclaim-bench", run, argc, argv);
}
