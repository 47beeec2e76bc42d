#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

namespace {

/// A test case that runs past its limit ends the run at once, naming itself. Without it a test
/// that hangs is only a suite killed at ctest's timeout, with nothing said of which case or why.
/// The limit is ACLAIM_TEST_CASE_LIMIT seconds (default 300: the slowest case takes 20 s alone,
/// about a minute under a sanitizer on a shared machine); 0 turns the watchdog off.
class Watchdog : public Catch::TestEventListenerBase {
  public:
    using TestEventListenerBase::TestEventListenerBase;

    void testRunStarting(Catch::TestRunInfo const& /*info*/) override {
        const char* env = std::getenv("ACLAIM_TEST_CASE_LIMIT");
        limit_ = std::chrono::seconds(env ? std::atol(env) : 300);
        if (limit_.count() > 0) thread_ = std::thread([this] { watch(); });
    }
    void testCaseStarting(Catch::TestCaseInfo const& info) override {
        const std::lock_guard lock(mutex_);
        name_ = info.name;
        started_ = std::chrono::steady_clock::now();
        running_ = true;
        wake_.notify_one();
    }
    void testCaseEnded(Catch::TestCaseStats const& /*stats*/) override {
        const std::lock_guard lock(mutex_);
        running_ = false;
    }
    void testRunEnded(Catch::TestRunStats const& /*stats*/) override {
        {
            const std::lock_guard lock(mutex_);
            finished_ = true;
            wake_.notify_one();
        }
        if (thread_.joinable()) thread_.join();
    }

  private:
    void watch() {
        std::unique_lock lock(mutex_);
        while (!finished_) {
            if (!running_) {
                wake_.wait(lock);
                continue;
            }
            const auto deadline = started_ + limit_;
            const std::string name = name_;
            if (wake_.wait_until(lock, deadline) == std::cv_status::timeout && running_ &&
                name_ == name && std::chrono::steady_clock::now() >= started_ + limit_) {
                std::fprintf(stderr,
                             "\nWATCHDOG: test case \"%s\" still running after %lld s; ending the "
                             "run (ACLAIM_TEST_CASE_LIMIT)\n",
                             name.c_str(), static_cast<long long>(limit_.count()));
                std::fflush(stderr);
                std::abort();
            }
        }
    }

    std::chrono::seconds limit_{300};
    std::mutex mutex_;
    std::condition_variable wake_;
    std::string name_;
    std::chrono::steady_clock::time_point started_;
    bool running_ = false;
    bool finished_ = false;
    std::thread thread_;
};

}  // namespace

CATCH_REGISTER_LISTENER(Watchdog)
