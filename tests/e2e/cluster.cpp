#include "tests/e2e/cluster.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "common/base/clock.hpp"

namespace aclaim::testing {

Cluster::Cluster() : conn_(db_.connect()) {
    endpoint_ = "tcp://127.0.0.1:" + std::to_string(free_port());
    char tmpl[] = "/tmp/aclaim-e2e.XXXXXX";
    log_dir_ = ::mkdtemp(tmpl);
}

Cluster::~Cluster() {
    processes_.clear();  // kills whatever still runs
    const char* keep = std::getenv("ACLAIM_KEEP_LOGS");
    if (!keep || std::string(keep) != "1") std::filesystem::remove_all(log_dir_);
}

std::vector<store::JobId> Cluster::enqueue(store::OrgId org, int count) {
    store::AssignmentStore store(db_.dsn());
    std::vector<store::NewJob> jobs;
    for (int i = 0; i < count; ++i) jobs.push_back({0, "e2e-" + std::to_string(i), 3});
    return store.enqueue(org, jobs, base::SystemClock().now());
}

Process& Cluster::start_coordinator(std::vector<std::string> extra) {
    return start_coordinator_at(endpoint_, std::move(extra));
}

Process& Cluster::start_coordinator_at(const std::string& endpoint,
                                       std::vector<std::string> extra) {
    std::vector<std::string> argv{
        bin("aclaim-coordinator"), "--dsn", db_.dsn(), "--bind", endpoint, "--log-level", "info"};
    if (curve_secret_key_file_.empty()) {
        argv.push_back("--plaintext");
    } else {
        argv.insert(argv.end(), {"--curve-secret-key-file", curve_secret_key_file_});
    }
    argv.insert(argv.end(), extra.begin(), extra.end());
    const auto log = log_dir_ + "/coordinator-" + std::to_string(++coordinator_runs_) + ".log";
    processes_.push_back(
        std::make_unique<Process>(argv, std::map<std::string, std::string>{}, log));
    return *processes_.back();
}

ops::CurveKeyPair Cluster::use_new_curve_keys() {
    auto server = ops::make_curve_key_pair();
    const auto key_file = log_dir_ + "/coordinator.key";
    {
        std::ofstream out(key_file);
        out << server.secret_key << "\n";
    }
    std::filesystem::permissions(
        key_file, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    use_curve(key_file);
    return server;
}

void Cluster::register_key(store::OrgId org, const std::string& name,
                           const std::string& public_key) {
    Process ctl({bin("aclaimctl"), "keys", "register", "--org", std::to_string(org), "--name", name,
                 "--public-key=" + public_key},
                {{"ACLAIM_DSN", db_.dsn()}}, log_dir_ + "/keys-" + name + ".log");
    if (ctl.wait_for(std::chrono::seconds(20)) != std::optional<int>(0)) {
        throw std::runtime_error("aclaimctl keys register " + name + " failed; see " +
                                 ctl.log_path());
    }
}

Process& Cluster::start_worker(const std::string& id, store::OrgId org,
                               std::vector<std::string> extra) {
    return start_worker_at(endpoint_, id, org, std::move(extra));
}

Process& Cluster::start_worker_at(const std::string& connect, const std::string& id,
                                  store::OrgId org, std::vector<std::string> extra) {
    std::vector<std::string> argv{
        bin("aclaim-worker"), "--connect", connect, "--org", std::to_string(org), "--id", id,
        "--log-level",        "info"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    processes_.push_back(std::make_unique<Process>(argv, std::map<std::string, std::string>{},
                                                   log_dir_ + "/" + id + ".log"));
    return *processes_.back();
}

long Cluster::scalar(const std::string& sql) {
    pqxx::read_transaction t(*conn_);
    const auto r = t.exec(sql);
    return r.empty() || r[0][0].is_null() ? 0 : r[0][0].as<long>();
}

std::string Cluster::text(const std::string& sql) {
    pqxx::read_transaction t(*conn_);
    const auto r = t.exec(sql);
    return r.empty() || r[0][0].is_null() ? "" : r[0][0].as<std::string>();
}

ops::CheckReport Cluster::check() {
    return ops::check(ops::load_history(*conn_));
}

std::string Cluster::tail_logs() const {
    std::ostringstream out;
    for (const auto& entry : std::filesystem::directory_iterator(log_dir_)) {
        std::ifstream in(entry.path());
        std::vector<std::string> lines;
        for (std::string line; std::getline(in, line);) lines.push_back(line);
        out << "---- " << entry.path().filename().string() << "\n";
        for (std::size_t i = lines.size() > 25 ? lines.size() - 25 : 0; i < lines.size(); ++i) {
            out << lines[i] << "\n";
        }
    }
    return out.str();
}

}  // namespace aclaim::testing
