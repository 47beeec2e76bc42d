// chart.svg: three panels on one time axis (pollers, claims/s, claim p99 latency), written as
// plain SVG so that it renders in any browser and in Markdown viewers without tooling.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "drills/canary.d/report.hpp"

namespace aclaim::drills {

namespace {

constexpr double kWidth = 900;
constexpr double kLeft = 70;
constexpr double kRight = 20;
constexpr double kTop = 50;
constexpr double kPanelHeight = 150;
constexpr double kPanelGap = 45;
constexpr double kBottom = 50;

/// At most two decimals, without trailing zeros.
std::string num(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", v);
    std::string s = buf;
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
    return s == "-0" ? "0" : s;
}

/// The smallest 1, 2, 4 or 8 times a power of ten at or above v: quarters of it are round too.
double nice_max(double v) {
    if (v <= 0) return 1;
    const double p = std::pow(10.0, std::floor(std::log10(v)));
    for (double m : {1.0, 2.0, 4.0, 8.0, 10.0}) {
        if (m * p >= v - 1e-9) return m * p;
    }
    return 10 * p;
}

std::string escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        if (c == '<')
            out += "&lt;";
        else if (c == '>')
            out += "&gt;";
        else if (c == '&')
            out += "&amp;";
        else
            out += c;
    }
    return out;
}

struct Series {
    std::string label;
    std::string colour;
    bool dashed = false;
    std::function<double(const Interval&)> value;
};

class Svg {
  public:
    Svg(const RunResult& run, double seconds) : run_(run), seconds_(std::max(seconds, 1.0)) {}

    double x(double t) const { return kLeft + (kWidth - kLeft - kRight) * t / seconds_; }

    void panel(int index, const std::string& title, const std::vector<Series>& series) {
        const double top = kTop + index * (kPanelHeight + kPanelGap);
        const double bottom = top + kPanelHeight;
        double highest = 0;
        for (const auto& s : series) {
            for (const auto& in : run_.intervals) highest = std::max(highest, s.value(in));
        }
        const double ymax = nice_max(highest);
        const auto y = [&](double v) { return bottom - kPanelHeight * v / ymax; };
        out_ += "<text x='" + num(kLeft) + "' y='" + num(top - 8) +
                "' font-size='13' font-weight='bold'>" + escape(title) + "</text>\n";
        for (int i = 0; i <= 4; ++i) {
            const double v = ymax * i / 4;
            out_ += "<line x1='" + num(kLeft) + "' x2='" + num(kWidth - kRight) + "' y1='" +
                    num(y(v)) + "' y2='" + num(y(v)) + "' stroke='#ddd'/>\n";
            out_ += "<text x='" + num(kLeft - 6) + "' y='" + num(y(v) + 4) +
                    "' font-size='11' text-anchor='end'>" + num(v) + "</text>\n";
        }
        out_ += "<line x1='" + num(kLeft) + "' x2='" + num(kLeft) + "' y1='" + num(top) + "' y2='" +
                num(bottom) + "' stroke='#333'/>\n";
        out_ += "<line x1='" + num(kLeft) + "' x2='" + num(kWidth - kRight) + "' y1='" +
                num(bottom) + "' y2='" + num(bottom) + "' stroke='#333'/>\n";
        const int step = std::max(1, static_cast<int>(std::ceil(seconds_ / 10)));
        for (int t = 0; t <= static_cast<int>(seconds_); t += step) {
            out_ += "<text x='" + num(x(t)) + "' y='" + num(bottom + 14) +
                    "' font-size='11' text-anchor='middle'>" + std::to_string(t) + "</text>\n";
        }
        for (const auto& v : run_.violations) {
            if (v.second < 0) continue;
            const double vx = x(v.second + 1);
            out_ += "<line x1='" + num(vx) + "' x2='" + num(vx) + "' y1='" + num(top) + "' y2='" +
                    num(bottom) + "' stroke='#c00' stroke-dasharray='4 3'><title>" +
                    escape(v.rule) + "</title></line>\n";
        }
        double legend_x = kWidth - kRight;
        for (auto it = series.rbegin(); it != series.rend(); ++it) {
            const auto& s = *it;
            std::string points;
            // Each interval is drawn flat across its second, so the line reads as a step chart.
            for (const auto& in : run_.intervals) {
                const double v = y(s.value(in));
                points += num(x(in.second)) + "," + num(v) + " " + num(x(in.second + 1)) + "," +
                          num(v) + " ";
            }
            out_ += "<polyline fill='none' stroke='" + s.colour + "' stroke-width='2'" +
                    (s.dashed ? " stroke-dasharray='6 4'" : "") + " points='" + points + "'/>\n";
            legend_x -= 6.5 * static_cast<double>(s.label.size()) + 34;
            out_ += "<line x1='" + num(legend_x) + "' x2='" + num(legend_x + 18) + "' y1='" +
                    num(top - 12) + "' y2='" + num(top - 12) + "' stroke='" + s.colour +
                    "' stroke-width='2'" + (s.dashed ? " stroke-dasharray='6 4'" : "") + "/>\n";
            out_ += "<text x='" + num(legend_x + 22) + "' y='" + num(top - 8) +
                    "' font-size='11'>" + escape(s.label) + "</text>\n";
        }
    }

    std::string finish(int panels) {
        const double height = kTop + panels * (kPanelHeight + kPanelGap) - kPanelGap + kBottom;
        std::string head = "<svg xmlns='http://www.w3.org/2000/svg' width='" + num(kWidth) +
                           "' height='" + num(height) + "' viewBox='0 0 " + num(kWidth) + " " +
                           num(height) + "' font-family='sans-serif'>\n";
        head += "<rect width='100%' height='100%' fill='white'/>\n";
        const auto& o = run_.options;
        head += "<text x='" + num(kLeft) +
                "' y='20' font-size='14' font-weight='bold'>aclaim "
                "canary: " +
                std::string(to_string(o.shape)) + ", " + std::to_string(o.start_pollers) +
                "&#8211;" + std::to_string(o.max_pollers) + " pollers, " +
                std::to_string(o.seconds) + " s (" + escape(run_.verdict()) + ")</text>\n";
        head += "<text x='" + num(kLeft) + "' y='" + num(height - 12) +
                "' font-size='11'>seconds since start; red dashed lines: contract violations "
                "(back-off from the next second). Behaviour only, no throughput "
                "guarantee.</text>\n";
        return head + out_ + "</svg>\n";
    }

  private:
    const RunResult& run_;
    double seconds_;
    std::string out_;
};

}  // namespace

std::string chart_svg(const RunResult& run) {
    const double seconds = std::max<double>(static_cast<double>(run.intervals.size()), 1.0);
    Svg svg(run, seconds);
    svg.panel(0, "pollers", {{"pollers in force", "#1f77b4", false, [](const Interval& in) {
                                  return static_cast<double>(in.pollers);
                              }}});
    svg.panel(1, "claims per second", {{"jobs assigned", "#2ca02c", false, [](const Interval& in) {
                                            return static_cast<double>(in.seen.jobs_assigned);
                                        }}});
    svg.panel(2, "claim latency p99 (ms)",
              {{"worker round trip", "#d62728", false,
                [](const Interval& in) { return in.claim_latency.p99_ms; }},
               {"coordinator statement", "#ff7f0e", false,
                [](const Interval& in) {
                    const double v = in.coordinator.statement_p99_ms;
                    return in.coordinator.available && std::isfinite(v) ? v : 0.0;
                }},
               {"direct claim probe", "#9467bd", true,
                [](const Interval& in) { return in.probe_latency.max_ms; }}});
    return svg.finish(3);
}

}  // namespace aclaim::drills
