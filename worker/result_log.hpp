#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

namespace aclaim::worker {

/// One line of the result file: what the worker saw happen to one job.
struct ResultLine {
    std::string_view worker;
    std::int64_t job_id = 0;
    std::int64_t generation = 0;
    std::string_view op;       ///< complete | fail | release | review
    std::string_view verdict;  ///< accepted | rejected | revoked
    bool replayed = false;
    std::string_view state;
    std::string_view reason;
    std::string_view detail;
};

/// Appends JSON lines so tests and drills can assert on what workers saw. Each line is flushed
/// at once: a worker that is killed a moment later must not lose what it already reported.
class ResultLog {
  public:
    /// An empty path makes a log that writes nothing. Throws when the file cannot be opened.
    explicit ResultLog(const std::string& path);
    void write(const ResultLine& line);

  private:
    struct Closer {
        void operator()(std::FILE* f) const { std::fclose(f); }
    };
    std::unique_ptr<std::FILE, Closer> file_;
};

}  // namespace aclaim::worker
