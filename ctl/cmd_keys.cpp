// keys generate|register|revoke|list: the CURVE key pairs workers and the coordinator
// authenticate with, and the worker_keys table that binds each worker public key to one
// organization and one worker name. Secret keys are written to files (mode 0600) and never
// printed or stored in the database; generate never writes over an existing file or link.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "common/base/clock.hpp"
#include "common/ops/recovery.hpp"
#include "common/ops/worker_keys.hpp"
#include "common/ops/worker_keys_sql.hpp"
#include "ctl/ctl.hpp"

namespace aclaim::ctl {

namespace {

struct GenerateArgs {
    std::string out_dir = ".";
    std::string name;
    bool server = false;
};

struct RegisterArgs {
    long long org = 0;
    std::string name;
    std::string public_key;
    std::vector<std::string> queues;
};

struct RevokeArgs {
    std::string public_key;
    std::string name;
    long long org = 0;
};

/// A file of the pair, created by generate() before anything is written to either.
struct KeyFile {
    std::string name;
    ::mode_t mode = 0600;
    int fd = -1;
};

/// A stem that names a file inside the output folder and nothing else.
void check_stem(const std::string& stem) {
    if (stem.empty() || stem.size() > 128 || stem == "." || stem == ".." ||
        stem.find('/') != std::string::npos || stem.find('\0') != std::string::npos) {
        throw UsageError("'" + stem + "' is not a key name: 1..128 bytes, no '/', not '.' or '..'");
    }
}

/// Creates `dir`/`f.name` with f.mode, only if nothing of that name exists: O_EXCL refuses an
/// existing file and a symbolic link, dangling or not, and O_NOFOLLOW says so again, so that a
/// file or link planted in a shared folder is never written through nor has its mode changed.
/// The mode is given at creation, so the secret is never readable by others, not even for a
/// moment (the umask can only narrow it).
void create_exclusive(int dir_fd, const std::string& dir, KeyFile& f) {
    f.fd = ::openat(dir_fd, f.name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                    f.mode);
    if (f.fd >= 0) return;
    const int err = errno;
    const std::string path = (std::filesystem::path(dir) / f.name).string();
    if (err == EEXIST || err == ELOOP) {
        throw UsageError(path +
                         " already exists (a file or a link): remove it or choose another "
                         "--out-dir or name; nothing was written");
    }
    throw UsageError("cannot create " + path + ": " + std::strerror(err));
}

void write_all(const std::string& path, int fd, const std::string& text) {
    std::size_t done = 0;
    while (done < text.size()) {
        const auto n = ::write(fd, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) throw UsageError("cannot write " + path + ": " + std::strerror(errno));
        done += static_cast<std::size_t>(n);
    }
    if (::fsync(fd) != 0) throw UsageError("cannot write " + path + ": " + std::strerror(errno));
}

int generate(const GenerateArgs& args) {
    const std::string base =
        args.server ? "coordinator" : (args.name.empty() ? "worker" : args.name);
    check_stem(base);
    const std::filesystem::path dir(args.out_dir);
    std::error_code made;
    std::filesystem::create_directories(dir, made);
    if (made) throw UsageError("cannot create " + dir.string() + ": " + made.message());
    // Both names are created relative to one descriptor of the folder, so that the folder
    // cannot be swapped between the checks and the writes.
    const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd < 0) {
        throw UsageError("cannot open " + dir.string() + ": " + std::strerror(errno));
    }
    std::array<KeyFile, 2> files{KeyFile{base + ".key", 0600}, KeyFile{base + ".pub", 0644}};
    // Neither file is written unless both could be created: a refused .pub leaves no .key.
    auto undo = [&](bool remove) {
        for (auto& f : files) {
            if (f.fd < 0) continue;
            ::close(f.fd);
            f.fd = -1;
            if (remove) ::unlinkat(dir_fd, f.name.c_str(), 0);
        }
    };
    ops::CurveKeyPair pair;
    try {
        for (auto& f : files) create_exclusive(dir_fd, dir.string(), f);
        pair = ops::make_curve_key_pair();
        write_all((dir / files[0].name).string(), files[0].fd, pair.secret_key + "\n");
        write_all((dir / files[1].name).string(), files[1].fd, pair.public_key + "\n");
    } catch (...) {
        undo(true);
        ::close(dir_fd);
        throw;
    }
    undo(false);
    ::close(dir_fd);
    // Only the public half goes to stdout, so that it can be captured by a script.
    std::cout << pair.public_key << "\n";
    std::cerr << "secret key written to " << (dir / files[0].name).string() << " (mode 0600)\n";
    return 0;
}

int register_key(const Global& global, const RegisterArgs& args) {
    try {
        ops::check_worker_key(args.org, args.name, args.public_key);
    } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
    }
    pqxx::connection conn(require_dsn(global));
    pqxx::work txn(conn, "keys_register");
    const auto queues =
        args.queues.empty() ? std::nullopt : std::optional<std::vector<std::string>>(args.queues);
    bool registered = false;
    try {
        registered = ops::register_worker_key(txn, args.org, args.name, args.public_key, queues);
    } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
    }
    if (!registered) {
        throw UsageError(
            "that public key is already registered (keys are never reused, even "
            "after revocation: generate a new pair)");
    }
    txn.commit();
    std::cout << "registered " << args.public_key << " for org " << args.org << " worker "
              << args.name;
    if (queues) {
        std::cout << ", limited to the queues";
        for (const auto& q : *queues) std::cout << " " << q;
    }
    std::cout << "\n";
    return 0;
}

int revoke(const Global& global, const RevokeArgs& args) {
    if (args.public_key.empty() == args.name.empty()) {
        throw UsageError("pass exactly one of --public-key or --name");
    }
    pqxx::connection conn(require_dsn(global));
    pqxx::work txn(conn, "keys_revoke");
    const auto now = global.clock.now();
    const std::vector<std::string> revoked =
        !args.public_key.empty() ? ops::revoke_worker_key(txn, args.public_key, now)
                                 : ops::revoke_worker_keys_named(txn, args.name, args.org, now);
    if (revoked.empty()) throw UsageError("no live key matches");
    txn.commit();
    for (const auto& key : revoked) std::cout << "revoked " << key << "\n";
    std::cerr << "new handshakes with these keys are refused once the coordinator's key cache "
                 "expires (--key-cache-ms); connections already open stay until they drop\n";
    return 0;
}

/// A key's queues for JSON: null for every queue, else the list.
nlohmann::json queue_list(const std::string& joined) {
    if (joined.empty()) return nullptr;
    auto out = nlohmann::json::array();
    std::size_t from = 0;
    while (from <= joined.size()) {
        const auto comma = joined.find(',', from);
        out.push_back(joined.substr(from, comma - from));
        if (comma == std::string::npos) break;
        from = comma + 1;
    }
    return out;
}

/// A timestamp column read as aclaim_us(): ISO 8601 in UTC with Z, as everything else prints.
std::string instant_text(const pqxx::field& f) {
    return ops::format_instant(base::instant_from_micros(f.as<base::Micros>()));
}

int list(const Global& global, bool json) {
    const auto rows = read_rows(global, "", ops::sql::kWorkerKeyList);
    if (json) {
        nlohmann::json out = {{"keys", nlohmann::json::array()}};
        for (const auto& r : rows) {
            out["keys"].push_back(
                {{"public_key", r[0].as<std::string>()},
                 {"org_id", r[1].as<long long>()},
                 {"name", r[2].as<std::string>()},
                 {"created_at", instant_text(r[3])},
                 {"revoked_at",
                  r[4].is_null() ? nlohmann::json() : nlohmann::json(instant_text(r[4]))},
                 {"queues", queue_list(r[5].as<std::string>())}});
        }
        std::cout << out.dump() << "\n";
        return 0;
    }
    // The queue limit is part of what a key allows, so it is shown with it ("*": every queue).
    std::printf("%-40s %-6s %-20s %-24s %s\n", "public_key", "org", "name", "queues", "revoked_at");
    for (const auto& r : rows) {
        std::printf("%-40s %-6lld %-20s %-24s %s\n", r[0].c_str(), r[1].as<long long>(),
                    r[2].c_str(), r[5].as<std::string>().empty() ? "*" : r[5].c_str(),
                    r[4].is_null() ? "-" : instant_text(r[4]).c_str());
    }
    return 0;
}

}  // namespace

void add_keys_command(CLI::App& app, Global& global, Action& action) {
    auto* cmd = add_group(app, "keys", "CURVE keys of workers and the coordinator");

    auto gen = std::make_shared<GenerateArgs>();
    auto* g = cmd->add_subcommand("generate", "New key pair: prints the public key, writes both");
    g->add_option("--out-dir", gen->out_dir, "Directory for <name>.key (0600) and <name>.pub")
        ->capture_default_str();
    // As a word or as --name: `keys generate sparky` is how people first write it.
    auto* stem = g->add_option("name", gen->name, "File name stem; defaults to 'worker'");
    g->add_option("--name", gen->name, "The same, as a flag")->excludes(stem);
    g->add_flag("--server", gen->server, "The coordinator's pair (coordinator.key/.pub)");
    g->callback([&action, gen] { action = [gen] { return generate(*gen); }; });

    auto [r, reg] =
        add_command<RegisterArgs>(*cmd, "register", "Bind a worker public key to an organization",
                                  global, action, register_key);
    base::add_org(*r, reg->org, "Organization id")->required();
    r->add_option("--name", reg->name, "Worker name; the worker must say HELLO with it")
        ->required()
        ->check([](const std::string& n) {
            return n.empty() || n.size() > 128 ? std::string("1..128 bytes") : std::string();
        });
    r->add_option("--public-key", reg->public_key, "Z85 public key")->required();
    r->add_option("--queues", reg->queues,
                  "Limit the key to these queues (HELLO naming another is refused)")
        ->delimiter(',');

    auto [v, rev] = add_command<RevokeArgs>(
        *cmd, "revoke", "Refuse a key (or every live key of a worker)", global, action, revoke);
    v->add_option("--public-key", rev->public_key, "Z85 public key");
    v->add_option("--name", rev->name, "Worker name: revokes all its live keys");
    base::add_org(*v, rev->org, "With --name: only in this organization");

    auto json = std::make_shared<bool>(false);
    auto* l = cmd->add_subcommand("list", "Every key, live and revoked");
    l->add_flag("--json", *json, "One JSON document");
    bind_action(l, global, action, json, list);
}

}  // namespace aclaim::ctl
