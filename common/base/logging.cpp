#include "common/base/logging.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <stdexcept>

#include "common/base/short_escape.hpp"

namespace aclaim::base {

namespace {

bool is_control(char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7f;
}

void append_escaped(std::string& out, std::string_view text) {
    static constexpr char kHex[] = "0123456789abcdef";
    for (const char c : text) {
        if (!is_control(c)) {
            out += c;
        } else if (const char* escape = short_escape(c)) {
            out += escape;
        } else {
            const auto u = static_cast<unsigned char>(c);
            out += "\\x";
            out += kHex[u >> 4];
            out += kHex[u & 0xf];
        }
    }
}

class EscapingSink final : public spdlog::sinks::sink {
  public:
    explicit EscapingSink(std::shared_ptr<spdlog::sinks::sink> inner) : inner_(std::move(inner)) {}

    void log(const spdlog::details::log_msg& msg) override {
        const std::string_view payload(msg.payload.data(), msg.payload.size());
        if (std::none_of(payload.begin(), payload.end(), is_control)) {
            inner_->log(msg);
            return;
        }
        std::string escaped;
        escaped.reserve(payload.size() + 16);
        append_escaped(escaped, payload);
        spdlog::details::log_msg copy(msg);
        copy.payload = spdlog::string_view_t(escaped.data(), escaped.size());
        inner_->log(copy);
    }
    void flush() override { inner_->flush(); }
    void set_pattern(const std::string& pattern) override { inner_->set_pattern(pattern); }
    void set_formatter(std::unique_ptr<spdlog::formatter> formatter) override {
        inner_->set_formatter(std::move(formatter));
    }

  private:
    std::shared_ptr<spdlog::sinks::sink> inner_;
};

}  // namespace

std::string printable(std::string_view text, std::size_t max_bytes) {
    std::string out;
    const auto kept = text.substr(0, max_bytes);
    out.reserve(kept.size() + 16);
    append_escaped(out, kept);
    if (kept.size() < text.size()) {
        out += "...(" + std::to_string(text.size() - kept.size()) + " more bytes)";
    }
    return out;
}

std::shared_ptr<spdlog::sinks::sink> escaping_sink(std::shared_ptr<spdlog::sinks::sink> inner) {
    return std::make_shared<EscapingSink>(std::move(inner));
}

void setup_logging(const std::string& process_name, std::string_view level_name) {
    const std::string level(level_name);
    const auto lvl = spdlog::level::from_str(level);
    if (lvl == spdlog::level::off && level != "off") {
        throw std::invalid_argument("unknown log level '" + level + "'");
    }
    auto logger = std::make_shared<spdlog::logger>(
        process_name, escaping_sink(std::make_shared<spdlog::sinks::stderr_color_sink_mt>()));
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [%n] %v");
    logger->set_level(lvl);
    spdlog::set_default_logger(logger);
}

}  // namespace aclaim::base
