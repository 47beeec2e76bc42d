// The console's parsers and renderings, without a database.

#include <catch2/catch.hpp>
#include <sstream>

#include "ctl/ctl.hpp"
#include "ctl/job_records.hpp"
#include "ctl/progress.hpp"
#include "ctl/terminal.hpp"

using namespace aclaim;
using namespace aclaim::ctl;

namespace {

std::vector<EnqueueRecord> csv(const std::string& text, RecordDefaults d = {}) {
    std::istringstream in(text);
    return read_csv(in, "jobs.csv", d);
}

std::vector<EnqueueRecord> jsonl(const std::string& text, RecordDefaults d = {}) {
    std::istringstream in(text);
    return read_jsonl(in, "jobs.jsonl", d);
}

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const UsageError& e) {
        return e.what();
    }
    return "no error";
}

}  // namespace

TEST_CASE("CSV records: columns in any order, defaults, quoting, line numbers", "[ctl]") {
    const auto r =
        csv("payload, priority ,org\n"
            "\"a, b\",3,2\n"
            "\n"
            "\"multi\nline \"\"quoted\"\"\",,5\r\n"
            "plain,-2,7\n",
            {0, 9, 4});
    REQUIRE(r.size() == 3);
    CHECK(r[0].org_id == 2);
    CHECK(r[0].job.payload == "a, b");
    CHECK(r[0].job.priority == 3);
    CHECK(r[0].job.max_attempts == 4);
    CHECK(r[0].line == 2);
    CHECK(r[1].job.payload == "multi\nline \"quoted\"");
    CHECK(r[1].job.priority == 9);
    CHECK(r[1].line == 4);
    CHECK(r[2].line == 6);
    CHECK(r[2].job.priority == -2);

    const auto with_default_org = csv("payload\nx\n", {11, 0, 3});
    REQUIRE(with_default_org.size() == 1);
    CHECK(with_default_org[0].org_id == 11);
}

TEST_CASE("CSV records: each mistake is named with its line", "[ctl]") {
    CHECK(error_of([] { csv(""); }).find("jobs.csv: empty") == 0);
    CHECK(error_of([] { csv("org,payload\n1,a\n1,b,c\n"); }) ==
          "jobs.csv:3: has 3 fields, the header has 2");
    CHECK(error_of([] { csv("org,payload,org\n"); }) ==
          "jobs.csv:1: column 'org' appears twice in the header");
    CHECK(error_of([] { csv("org,priority\n"); }) ==
          "jobs.csv:1: the header has no payload column");
    CHECK(error_of([] { csv("org,payload,priority\n1,a,high\n"); }) ==
          "jobs.csv:2: priority 'high' is not an integer");
    CHECK(error_of([] { csv("org,payload,priority\n1,a,99999999999\n"); }) ==
          "jobs.csv:2: priority 99999999999 is out of range");
    CHECK(error_of([] { csv("org,payload,max_attempts\n1,a,0\n"); }) ==
          "jobs.csv:2: max_attempts must be 1..1000");
    CHECK(error_of([] { csv("org,payload\n0,a\n"); }) ==
          "jobs.csv:2: org '0' is not an organization id (a whole number from 1 up)");
    CHECK(error_of([] { csv("org,payload\n,a\n"); }) ==
          "jobs.csv:2: no organization: fill the org column or pass --org");
    CHECK(error_of([] { csv("org,payload\n1,\"a\"b\n"); }) ==
          "jobs.csv:2: text after the closing quote of a field");
}

TEST_CASE("JSON lines records", "[ctl]") {
    const auto r = jsonl(
        "{\"org_id\": 3, \"payload\": \"x\", \"max_attempts\": 9}\n"
        "   \n"
        "{\"payload\": [1, 2], \"priority\": -4}\n",
        {8, 1, 3});
    REQUIRE(r.size() == 2);
    CHECK(r[0].org_id == 3);
    CHECK(r[0].job.max_attempts == 9);
    CHECK(r[0].job.priority == 1);
    CHECK(r[1].org_id == 8);
    CHECK(r[1].job.payload == "[1,2]");
    CHECK(r[1].line == 3);
    CHECK(error_of([] { jsonl("[1]\n"); }) == "jobs.jsonl:1: each line must be one JSON object");
    CHECK(error_of([] { jsonl("{\"payload\": \"a\"}\n"); }) ==
          "jobs.jsonl:1: no organization: add \"org\" or pass --org");
    CHECK(error_of([] { jsonl("{\"org\": \"1\", \"payload\": \"a\"}\n"); }) ==
          "jobs.jsonl:1: org must be an integer");
    CHECK(error_of([] { jsonl("{\"org\": 1, \"payload\": \"a\\u0000b\"}\n"); }).find("NUL byte") !=
          std::string::npos);
}

TEST_CASE("durations as operators write and read them", "[ctl]") {
    CHECK(parse_duration("500ms") == 500 * base::kMillis);
    CHECK(parse_duration("10m") == 600 * base::kSeconds);
    CHECK(parse_duration("1h30m") == 5400 * base::kSeconds);
    CHECK(parse_duration("2d") == 2 * 86400L * base::kSeconds);
    CHECK_FALSE(parse_duration("10"));
    CHECK_FALSE(parse_duration("m"));
    CHECK_FALSE(parse_duration("5 minutes"));
    CHECK_FALSE(parse_duration(""));
    CHECK(format_duration(850 * base::kMillis) == "850ms");
    CHECK(format_duration(42 * base::kSeconds) == "42s");
    CHECK(format_duration(185 * base::kSeconds) == "3m05s");
    CHECK(format_duration(7620 * base::kSeconds) == "2h07m");
    CHECK(format_duration(-3 * base::kSeconds) == "-3s");
    CHECK(one_line("a\nb\tc", 10) == "a b c");
    CHECK(one_line("abcdefghijkl", 8) == "abcde...");
}

TEST_CASE("the progress bar's text", "[ctl]") {
    using namespace std::chrono_literals;
    CHECK(ProgressBar::render("enqueue", 0, 1000, 0s) ==
          "enqueue [------------------------------]   0%  0/1000  0/s");
    CHECK(ProgressBar::render("enqueue", 500, 1000, 2s) ==
          "enqueue [###############---------------]  50%  500/1000  250/s  eta 2s");
    CHECK(ProgressBar::render("enqueue", 1000, 1000, 1s) ==
          "enqueue [##############################] 100%  1000/1000  1.0k/s");
}

TEST_CASE("records carry what the flags offer: queue, dedupe key, run time, lists", "[ctl]") {
    const auto c =
        csv("org,payload,queue,dedupe_key,run_at,depends_on,on_failure,exclude_keys,"
            "exclude_completers_of\n"
            "1,a,electrical,order-7,2030-01-02T03:04:05Z,\"101,102\",run,sparky rover,101\n"
            "1,b,,,,,,,\n");
    REQUIRE(c.size() == 2);
    CHECK(c[0].job.queue == "electrical");
    CHECK(c[0].has_queue);
    CHECK(c[0].job.dedupe_key == "order-7");
    REQUIRE(c[0].job.run_at.has_value());
    CHECK(c[0].has_run_at);
    CHECK(c[0].job.depends_on == std::vector<store::JobId>{101, 102});
    CHECK(c[0].job.on_failure == store::DependencyPolicy::Run);
    CHECK(c[0].job.exclude_keys == std::vector<std::string>{"sparky", "rover"});
    CHECK(c[0].job.exclude_completers_of == std::vector<store::JobId>{101});
    // A blank field sets nothing: the flags fill it.
    CHECK_FALSE(c[1].has_queue);
    CHECK_FALSE(c[1].has_run_at);
    CHECK_FALSE(c[1].has_depends_on);
    CHECK_FALSE(c[1].job.dedupe_key.has_value());

    const auto j = jsonl(
        "{\"org\": 1, \"payload\": \"a\", \"queue\": \"welding\", \"dedupe_key\": \"k\", "
        "\"run_at\": \"2030-01-02T03:04:05Z\", \"depends_on\": [5, 6], \"on_failure\": "
        "\"cancel\", \"exclude_keys\": [\"sparky\"], \"exclude_completers_of\": [5]}\n");
    REQUIRE(j.size() == 1);
    CHECK(j[0].job.queue == "welding");
    CHECK(j[0].job.dedupe_key == "k");
    CHECK(j[0].has_run_at);
    CHECK(j[0].job.depends_on == std::vector<store::JobId>{5, 6});
    CHECK(j[0].has_on_failure);
    CHECK(j[0].job.exclude_keys == std::vector<std::string>{"sparky"});
    CHECK(j[0].job.exclude_completers_of == std::vector<store::JobId>{5});

    CHECK(error_of([] { csv("org,payload,queue\n1,a,no space\n"); }) ==
          "jobs.csv:2: queue 'no space' is not a queue name");
    CHECK(error_of([] { csv("org,payload,depends_on\n1,a,x\n"); }) ==
          "jobs.csv:2: depends_on: 'x' is not a job id");
    CHECK(error_of([] { jsonl("{\"org\": 1, \"payload\": \"a\", \"run_at\": \"soon\"}\n"); }) ==
          "jobs.jsonl:1: run_at 'soon' is not an ISO 8601 instant");
    CHECK(error_of([] { jsonl("{\"org\": 1, \"payload\": \"a\", \"depends_on\": 5}\n"); }) ==
          "jobs.jsonl:1: depends_on must be an array of job ids");
    CHECK(error_of([] { jsonl("{\"org\": 1, \"payload\": \"a\", \"on_failure\": \"x\"}\n"); }) ==
          "jobs.jsonl:1: on_failure 'x' is neither cancel nor run");
}

TEST_CASE("ZeroMQ endpoints as --bind takes them", "[ctl]") {
    CHECK(base::is_zmq_endpoint("tcp://*:5555"));
    CHECK(base::is_zmq_endpoint("tcp://127.0.0.1:*"));
    CHECK(base::is_zmq_endpoint("tcp://[::1]:5555"));
    CHECK(base::is_zmq_endpoint("ipc:///run/aclaim.sock"));
    CHECK(base::is_zmq_endpoint("inproc://router"));
    CHECK_FALSE(base::is_zmq_endpoint("nonsense"));
    CHECK_FALSE(base::is_zmq_endpoint("tcp://host"));
    CHECK_FALSE(base::is_zmq_endpoint("tcp://host:port"));
    CHECK_FALSE(base::is_zmq_endpoint("tcp://host:70000"));
    CHECK_FALSE(base::is_zmq_endpoint("udp://host:5555"));
    CHECK_FALSE(base::is_zmq_endpoint("tcp://"));
}
