#pragma once

// The archive format of a detached job_events partition (docs/operations.md, "Retention"): JSON
// Lines, one header, one line per event in id order, one trailer that counts the events and
// carries the SHA-256 of every byte before it. A truncated or altered file fails verification.

#include <cstdint>
#include <functional>
#include <istream>
#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "common/base/clock.hpp"
#include "common/ops/job_record.hpp"

namespace aclaim::ops {

inline constexpr const char* kArchiveFormat = "aclaim-job-events";
inline constexpr int kArchiveVersion = 1;

/// The partition an archive holds.
struct ArchiveHeader {
    std::string partition;
    std::optional<base::Instant> from;  ///< none: the open lower bound of the legacy partition
    base::Instant to{};
    base::Instant archived_at{};
};

/// What the trailer says, and what a writer or a verifying reader counted.
struct ArchiveSummary {
    std::int64_t rows = 0;
    std::int64_t min_id = 0;
    std::int64_t max_id = 0;
    std::string sha256;  ///< lowercase hex
};

/// The running SHA-256 of an archive's bytes (libsodium), opaque here.
struct ArchiveHash;

/// Writes an archive to a stream: the header at construction, add() per event in id order,
/// finish() for the trailer.
class ArchiveWriter {
  public:
    ArchiveWriter(std::ostream& out, const ArchiveHeader& header);
    ~ArchiveWriter();
    ArchiveWriter(const ArchiveWriter&) = delete;
    ArchiveWriter& operator=(const ArchiveWriter&) = delete;

    void add(const store::AuditEvent& event);
    ArchiveSummary finish();

  private:
    void line(const std::string& text);

    std::ostream& out_;
    std::unique_ptr<ArchiveHash> hash_;
    ArchiveSummary summary_;
};

/// Reads an archive, calling `each` for every event, and verifies it: the format and version,
/// ids increasing, every event inside the header's range, and the trailer's count and SHA-256.
/// Throws std::runtime_error naming the first problem (a truncated file has no trailer).
struct ArchiveContents {
    ArchiveHeader header;
    ArchiveSummary summary;
};
ArchiveContents read_archive(std::istream& in,
                             const std::function<void(const store::AuditEvent&)>& each);

/// The event as one JSON object, as the archive holds it (also what `retention read` prints).
std::string archive_line(const store::AuditEvent& event);

}  // namespace aclaim::ops
