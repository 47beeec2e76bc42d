#include "ctl/progress.hpp"

#include <algorithm>
#include <cstdio>

namespace aclaim::ctl {

namespace {

constexpr int kWidth = 30;
constexpr auto kRedrawEvery = std::chrono::milliseconds(100);

std::string rate_text(double per_second) {
    char buf[32];
    if (per_second >= 1000) {
        std::snprintf(buf, sizeof buf, "%.1fk/s", per_second / 1000);
    } else {
        std::snprintf(buf, sizeof buf, "%.0f/s", per_second);
    }
    return buf;
}

}  // namespace

ProgressBar::ProgressBar(const base::Clock& clock, std::string label, std::int64_t total,
                         bool enabled)
    : clock_(clock),
      label_(std::move(label)),
      total_(std::max<std::int64_t>(total, 1)),
      enabled_(enabled),
      started_(clock.monotonic_now()) {}

ProgressBar::~ProgressBar() {
    finish();
}

std::string ProgressBar::render(const std::string& label, std::int64_t done, std::int64_t total,
                                std::chrono::steady_clock::duration elapsed) {
    total = std::max<std::int64_t>(total, 1);
    done = std::clamp<std::int64_t>(done, 0, total);
    const int filled = static_cast<int>(done * kWidth / total);
    std::string bar(static_cast<std::size_t>(filled), '#');
    bar.append(static_cast<std::size_t>(kWidth - filled), '-');
    const double seconds = std::chrono::duration<double>(elapsed).count();
    const double rate = seconds > 0 ? static_cast<double>(done) / seconds : 0;
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s [%s] %3d%%  %lld/%lld  %s", label.c_str(), bar.c_str(),
                  static_cast<int>(done * 100 / total), static_cast<long long>(done),
                  static_cast<long long>(total), rate_text(rate).c_str());
    std::string out = buf;
    if (rate > 0 && done < total) {
        std::snprintf(buf, sizeof buf, "  eta %.0fs", static_cast<double>(total - done) / rate);
        out += buf;
    }
    return out;
}

void ProgressBar::update(std::int64_t done) {
    done_ = done;
    if (!enabled_) return;
    const auto now = clock_.monotonic_now();
    if (now - drawn_ < kRedrawEvery) return;
    drawn_ = now;
    draw();
}

void ProgressBar::draw() {
    const auto text = render(label_, done_, total_, clock_.monotonic_now() - started_);
    std::fprintf(stderr, "\r\033[K%s", text.c_str());
    std::fflush(stderr);
}

void ProgressBar::finish() {
    if (finished_) return;
    finished_ = true;
    if (!enabled_) return;
    draw();
    std::fputc('\n', stderr);
}

}  // namespace aclaim::ctl
