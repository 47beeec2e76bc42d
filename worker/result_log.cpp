#include "worker/result_log.hpp"

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "common/base/short_escape.hpp"

namespace aclaim::worker {

namespace {

std::string json_string(std::string_view s) {
    std::string out = "\"";
    for (const char c : s) {
        switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            default:
                if (const char* escape = base::short_escape(c)) {
                    out += escape;
                } else if (static_cast<unsigned char>(c) < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
                    out += buf;
                } else {
                    out += c;
                }
        }
    }
    return out + "\"";
}

}  // namespace

ResultLog::ResultLog(const std::string& path) {
    if (path.empty()) return;
    file_.reset(std::fopen(path.c_str(), "a"));
    if (!file_)
        throw std::runtime_error("cannot open result file " + path + ": " + std::strerror(errno));
}

void ResultLog::write(const ResultLine& l) {
    if (!file_) return;
    const std::string line =
        "{\"worker\":" + json_string(l.worker) + ",\"job_id\":" + std::to_string(l.job_id) +
        ",\"generation\":" + std::to_string(l.generation) + ",\"op\":" + json_string(l.op) +
        ",\"verdict\":" + json_string(l.verdict) +
        ",\"replayed\":" + (l.replayed ? "true" : "false") + ",\"state\":" + json_string(l.state) +
        ",\"reason\":" + json_string(l.reason) + ",\"detail\":" + json_string(l.detail) + "}\n";
    // One fwrite per line in append mode: lines from concurrent workers do not interleave.
    std::fwrite(line.data(), 1, line.size(), file_.get());
    std::fflush(file_.get());
}

}  // namespace aclaim::worker
