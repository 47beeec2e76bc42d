#include "drills/canary.d/metrics.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmath>
#include <limits>
#include <optional>
#include <sstream>

namespace aclaim::drills {

namespace {

/// A scrape slower than this is given up for the interval; /metrics answers in microseconds.
constexpr int kScrapeTimeoutMs = 1000;
/// Larger answers are not Prometheus text from the coordinator.
constexpr std::size_t kMaxAnswerBytes = std::size_t{4} * 1024 * 1024;

/// One bucket line's series key (labels without le) and its le value.
struct BucketLabel {
    std::string key;
    std::string le;
};

/// Splits `name{a="x",le="0.1"}` into the series key without le, and the le value.
std::optional<BucketLabel> split_bucket(const std::string& metric) {
    const auto brace = metric.find('{');
    if (brace == std::string::npos || metric.back() != '}') return std::nullopt;
    std::string name = metric.substr(0, brace);
    const std::string suffix = "_bucket";
    if (name.size() <= suffix.size() ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
        return std::nullopt;
    }
    name.resize(name.size() - suffix.size());
    const std::string labels = metric.substr(brace + 1, metric.size() - brace - 2);
    std::string kept;
    std::optional<std::string> le;
    std::stringstream in(labels);
    for (std::string part; std::getline(in, part, ',');) {
        if (part.rfind("le=\"", 0) == 0 && part.size() >= 5) {
            le = part.substr(4, part.size() - 5);
        } else {
            kept += (kept.empty() ? "" : ",") + part;
        }
    }
    if (!le) return std::nullopt;
    return BucketLabel{kept.empty() ? name : name + "{" + kept + "}", *le};
}

}  // namespace

BucketCounts BucketCounts::since(const BucketCounts& earlier) const {
    BucketCounts d;
    if (earlier.upper_s != upper_s) return d;
    d.upper_s = upper_s;
    for (std::size_t i = 0; i < cumulative.size(); ++i) {
        d.cumulative.push_back(cumulative[i] - earlier.cumulative[i]);
    }
    return d;
}

double BucketCounts::quantile_ms(double q) const {
    const double n = count();
    if (n <= 0) return 0;
    const double want = std::ceil(q * n - 1e-9);
    for (std::size_t i = 0; i < cumulative.size(); ++i) {
        if (cumulative[i] >= want) return upper_s[i] * 1000;
    }
    return std::numeric_limits<double>::infinity();
}

Scrape parse_histograms(const std::string& text) {
    Scrape out;
    std::stringstream in(text);
    for (std::string line; std::getline(in, line);) {
        if (line.empty() || line[0] == '#') continue;
        const auto space = line.rfind(' ');
        if (space == std::string::npos) continue;
        const auto bucket = split_bucket(line.substr(0, space));
        if (!bucket) continue;
        double upper = 0;
        double value = 0;
        try {
            upper = bucket->le == "+Inf" ? std::numeric_limits<double>::infinity()
                                         : std::stod(bucket->le);
            value = std::stod(line.substr(space + 1));
        } catch (const std::exception&) {
            continue;
        }
        auto& b = out[bucket->key];
        b.upper_s.push_back(upper);
        b.cumulative.push_back(value);
    }
    return out;
}

std::optional<std::string> fetch_metrics(int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return std::nullopt;
    timeval tv{kScrapeTimeoutMs / 1000, static_cast<suseconds_t>(kScrapeTimeoutMs % 1000) * 1000};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    std::string answer;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
        // HTTP/1.0: the server closes the connection after the answer, which ends the read.
        const std::string request = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
        if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(request.size())) {
            char buf[16384];
            for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) {
                answer.append(buf, static_cast<std::size_t>(n));
                if (answer.size() > kMaxAnswerBytes) break;
            }
        }
    }
    ::close(fd);
    if (answer.rfind("HTTP/1.", 0) != 0 || answer.find(" 200 ") == std::string::npos) {
        return std::nullopt;
    }
    const auto body = answer.find("\r\n\r\n");
    if (body == std::string::npos) return std::nullopt;
    return answer.substr(body + 4);
}

CoordinatorTiming timing_between(const Scrape& earlier, const Scrape& later) {
    CoordinatorTiming t;
    const auto find = [](const Scrape& s, const char* key) -> const BucketCounts* {
        const auto it = s.find(key);
        return it == s.end() ? nullptr : &it->second;
    };
    const auto* s0 = find(earlier, kClaimStatementSeries);
    const auto* s1 = find(later, kClaimStatementSeries);
    const auto* c0 = find(earlier, kClaimServiceSeries);
    const auto* c1 = find(later, kClaimServiceSeries);
    if (!s0 || !s1 || !c0 || !c1) return t;
    const auto statement = s1->since(*s0);
    const auto service = c1->since(*c0);
    if (statement.upper_s.empty() || service.upper_s.empty()) return t;
    t.available = true;
    t.statements = statement.count();
    t.statement_p50_ms = statement.quantile_ms(0.50);
    t.statement_p99_ms = statement.quantile_ms(0.99);
    t.service_p50_ms = service.quantile_ms(0.50);
    t.service_p99_ms = service.quantile_ms(0.99);
    return t;
}

}  // namespace aclaim::drills
