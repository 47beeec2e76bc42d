#include "common/ops/event_archive.hpp"

#include <sodium.h>

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "common/base/bounded_json.hpp"
#include "common/ops/recovery.hpp"

namespace aclaim::ops {

struct ArchiveHash {
    crypto_hash_sha256_state state{};
    ArchiveHash() { crypto_hash_sha256_init(&state); }
    void update(const std::string& bytes) {
        crypto_hash_sha256_update(&state, reinterpret_cast<const unsigned char*>(bytes.data()),
                                  bytes.size());
    }
    std::string hex() {
        unsigned char digest[crypto_hash_sha256_BYTES];
        crypto_hash_sha256_final(&state, digest);
        char text[2 * crypto_hash_sha256_BYTES + 1];
        sodium_bin2hex(text, sizeof text, digest, sizeof digest);
        return text;
    }
};

namespace {

nlohmann::json instant_json(const std::optional<base::Instant>& t) {
    if (!t) return nullptr;
    return format_instant(*t);
}

base::Instant instant_of(const nlohmann::json& j, const char* what) {
    const auto t = j.is_string() ? parse_instant(j.get<std::string>()) : std::nullopt;
    if (!t) throw std::runtime_error(std::string("archive: ") + what + " is not an instant");
    return *t;
}

}  // namespace

std::string archive_line(const store::AuditEvent& e) {
    nlohmann::json j{
        {"id", e.id},
        {"job_id", e.job_id},
        {"org_id", e.org_id},
        {"generation", e.generation},
        {"kind", e.kind},
        {"worker", e.worker.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.worker)},
        {"at", format_instant(e.at)},
        {"detail", e.detail}};
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

ArchiveWriter::ArchiveWriter(std::ostream& out, const ArchiveHeader& h)
    : out_(out), hash_(std::make_unique<ArchiveHash>()) {
    if (sodium_init() < 0) throw std::runtime_error("libsodium failed to initialise");
    const nlohmann::json header{
        {"format", kArchiveFormat},   {"version", kArchiveVersion},
        {"partition", h.partition},   {"from", instant_json(h.from)},
        {"to", format_instant(h.to)}, {"archived_at", format_instant(h.archived_at)}};
    line(header.dump());
}

ArchiveWriter::~ArchiveWriter() = default;

void ArchiveWriter::line(const std::string& text) {
    const std::string bytes = text + "\n";
    hash_->update(bytes);
    out_ << bytes;
    if (!out_) throw std::runtime_error("archive: write failed");
}

void ArchiveWriter::add(const store::AuditEvent& e) {
    if (summary_.rows > 0 && e.id <= summary_.max_id)
        throw std::logic_error("archive: events must come in increasing id order");
    if (summary_.rows == 0) summary_.min_id = e.id;
    summary_.max_id = e.id;
    ++summary_.rows;
    line(archive_line(e));
}

ArchiveSummary ArchiveWriter::finish() {
    summary_.sha256 = hash_->hex();
    const nlohmann::json trailer{{"end", true},
                                 {"rows", summary_.rows},
                                 {"min_id", summary_.min_id},
                                 {"max_id", summary_.max_id},
                                 {"sha256", summary_.sha256}};
    out_ << trailer.dump() << "\n";
    out_.flush();
    if (!out_) throw std::runtime_error("archive: write failed");
    return summary_;
}

ArchiveContents read_archive(std::istream& in,
                             const std::function<void(const store::AuditEvent&)>& each) {
    if (sodium_init() < 0) throw std::runtime_error("libsodium failed to initialise");
    ArchiveHash hash;
    ArchiveContents out;
    std::string text;
    std::int64_t line_no = 0;
    bool have_header = false;
    auto fail = [&](const std::string& what) {
        throw std::runtime_error("archive line " + std::to_string(line_no) + ": " + what);
    };
    while (std::getline(in, text)) {
        ++line_no;
        nlohmann::json j;
        try {
            j = base::parse_bounded_json(text);
        } catch (const nlohmann::json::exception& e) {
            fail(std::string("not JSON: ") + e.what());
        }
        if (!j.is_object()) fail("not a JSON object");
        if (!have_header) {
            if (j.value("format", "") != kArchiveFormat) fail("not an aclaim job_events archive");
            if (j.value("version", 0) != kArchiveVersion)
                fail("archive version " + j.value("version", nlohmann::json()).dump() + " is not " +
                     std::to_string(kArchiveVersion));
            out.header.partition = j.value("partition", "");
            if (!j["from"].is_null()) out.header.from = instant_of(j["from"], "from");
            out.header.to = instant_of(j["to"], "to");
            out.header.archived_at = instant_of(j["archived_at"], "archived_at");
            have_header = true;
            hash.update(text + "\n");
            continue;
        }
        if (j.contains("end")) {
            const std::string digest = hash.hex();
            if (j.value("rows", std::int64_t{-1}) != out.summary.rows)
                fail("the trailer counts " + j.value("rows", nlohmann::json()).dump() +
                     " events, the file holds " + std::to_string(out.summary.rows));
            if (j.value("sha256", "") != digest)
                fail("SHA-256 mismatch: the trailer says " + j.value("sha256", "") +
                     ", the content hashes to " + digest);
            out.summary.sha256 = digest;
            if (std::getline(in, text)) fail("content after the trailer");
            return out;
        }
        store::AuditEvent e;
        try {
            e.id = j.at("id").get<std::int64_t>();
            e.job_id = j.at("job_id").get<store::JobId>();
            e.org_id = j.at("org_id").get<store::OrgId>();
            e.generation = j.at("generation").get<store::Generation>();
            e.kind = j.at("kind").get<std::string>();
            e.worker = j.at("worker").is_null() ? "" : j.at("worker").get<std::string>();
            e.detail = j.at("detail").get<std::string>();
        } catch (const nlohmann::json::exception& ex) {
            fail(std::string("not an event: ") + ex.what());
        }
        e.at = instant_of(j["at"], "at");
        if (out.summary.rows > 0 && e.id <= out.summary.max_id) fail("ids do not increase");
        if ((out.header.from && e.at < *out.header.from) || e.at >= out.header.to)
            fail("event " + std::to_string(e.id) + " lies outside the partition's range");
        if (out.summary.rows == 0) out.summary.min_id = e.id;
        out.summary.max_id = e.id;
        ++out.summary.rows;
        hash.update(text + "\n");
        each(e);
    }
    if (!have_header) throw std::runtime_error("archive: empty file");
    throw std::runtime_error("archive: no trailer after " + std::to_string(out.summary.rows) +
                             " events: the file is truncated");
}

}  // namespace aclaim::ops
