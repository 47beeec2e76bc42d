#include "ctl/job_records.hpp"

#include <charconv>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "common/base/bounded_json.hpp"
#include "common/base/org_id.hpp"
#include "common/base/queue_name.hpp"
#include "common/ops/recovery.hpp"
#include "ctl/ctl.hpp"

namespace aclaim::ctl {

namespace {

constexpr int kMaxAttemptsLimit = 1000;

[[noreturn]] void bad(const std::string& source, std::size_t line, const std::string& what) {
    throw UsageError(source + ":" + std::to_string(line) + ": " + what);
}

std::optional<std::int64_t> parse_int(std::string_view text) {
    while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
    while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
    return v;
}

/// Checks one record's values against the schema's constraints, so that the database never has
/// to refuse a batch for a reason a line number could have explained.
void check_record(const EnqueueRecord& r, const std::string& source) {
    if (!base::parse_org(std::to_string(r.org_id)))
        bad(source, r.line, "org " + base::org_refusal(std::to_string(r.org_id)));
    if (r.job.max_attempts &&
        (*r.job.max_attempts < 1 || *r.job.max_attempts > kMaxAttemptsLimit)) {
        bad(source, r.line, "max_attempts must be 1.." + std::to_string(kMaxAttemptsLimit));
    }
    if (r.job.payload.find('\0') != std::string::npos) {
        bad(source, r.line, "payload contains a NUL byte, which PostgreSQL text cannot hold");
    }
}

/// The items of a list field: separated by commas or spaces, none when it is blank.
std::vector<std::string> list_items(const std::string& text) {
    std::vector<std::string> out;
    std::string item;
    for (const char c : text + ",") {
        if (c == ',' || c == ' ') {
            if (!item.empty()) out.push_back(std::move(item));
            item.clear();
        } else {
            item += c;
        }
    }
    return out;
}

/// The lifecycle fields of one record, given as text (CSV) or taken from JSON: the same checks
/// and words for both.
class Fields {
  public:
    Fields(EnqueueRecord& r, const std::string& source) : r_(r), source_(source) {}

    void queue(const std::string& queue) {
        if (!base::valid_queue_name(queue))
            bad(source_, r_.line, "queue '" + queue + "' is not a queue name");
        r_.job.queue = queue;
        r_.has_queue = true;
    }

    void run_at(const std::string& text) {
        const auto at = ops::parse_instant(text);
        if (!at) bad(source_, r_.line, "run_at '" + text + "' is not an ISO 8601 instant");
        r_.job.run_at = at;
        r_.has_run_at = true;
    }

    void on_failure(const std::string& text) {
        if (text != "cancel" && text != "run")
            bad(source_, r_.line, "on_failure '" + text + "' is neither cancel nor run");
        r_.job.on_failure =
            text == "run" ? store::DependencyPolicy::Run : store::DependencyPolicy::Cancel;
        r_.has_on_failure = true;
    }

    void dedupe_key(const std::string& key) {
        if (key.empty()) bad(source_, r_.line, "dedupe_key is empty");
        r_.job.dedupe_key = key;
    }

    /// A job id of a list field (`field` names it), one of the list `text` holds.
    std::vector<store::JobId> job_ids(const std::string& text, const char* field) {
        std::vector<store::JobId> out;
        for (const auto& item : list_items(text)) {
            const auto v = parse_int(item);
            if (!v || *v <= 0)
                bad(source_, r_.line, std::string(field) + ": '" + item + "' is not a job id");
            out.push_back(*v);
        }
        return out;
    }

  private:
    EnqueueRecord& r_;
    const std::string& source_;
};

int as_int(std::int64_t v, const std::string& source, std::size_t line, const char* field) {
    if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
        bad(source, line, std::string(field) + " " + std::to_string(v) + " is out of range");
    }
    return static_cast<int>(v);
}

/// Reads one CSV record (RFC 4180); false at the end of the input. `lines` counts the physical
/// lines consumed, so that errors point at the line where a record starts.
bool next_csv_record(std::istream& in, std::vector<std::string>& fields, std::size_t& lines,
                     const std::string& source) {
    fields.clear();
    std::string line;
    if (!std::getline(in, line)) return false;
    ++lines;
    const std::size_t start = lines;
    std::string field;
    bool quoted = false;
    bool was_quoted = false;
    for (std::size_t i = 0;; ++i) {
        if (i == line.size()) {
            if (quoted) {
                // A quoted field goes on past the end of the line.
                if (!std::getline(in, line)) bad(source, start, "a quoted field is never closed");
                ++lines;
                field += '\n';
                i = static_cast<std::size_t>(-1);
                continue;
            }
            fields.push_back(std::move(field));
            return true;
        }
        const char c = line[i];
        if (quoted) {
            if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
                field += '"';
                ++i;
            } else if (c == '"') {
                quoted = false;
            } else {
                field += c;
            }
        } else if (c == '"' && field.empty() && !was_quoted) {
            quoted = true;
            was_quoted = true;
        } else if (c == ',') {
            fields.push_back(std::move(field));
            field.clear();
            was_quoted = false;
        } else if (c == '\r' && i + 1 == line.size()) {
            // CRLF line ending.
        } else if (was_quoted) {
            bad(source, start, "text after the closing quote of a field");
        } else {
            field += c;
        }
    }
}

}  // namespace

std::vector<EnqueueRecord> read_csv(std::istream& in, const std::string& source,
                                    const RecordDefaults& defaults) {
    std::vector<std::string> header;
    std::size_t lines = 0;
    do {
        if (!next_csv_record(in, header, lines, source)) {
            throw UsageError(source +
                             ": empty: the first line must name the columns, e.g. "
                             "org,priority,payload");
        }
    } while (header.size() == 1 && header[0].empty());
    int org_col = -1, priority_col = -1, payload_col = -1, attempts_col = -1;
    int queue_col = -1, dedupe_col = -1, run_at_col = -1, depends_col = -1, on_failure_col = -1;
    int exclude_keys_col = -1, exclude_completers_col = -1;
    for (std::size_t i = 0; i < header.size(); ++i) {
        std::string name = header[i];
        while (!name.empty() && name.back() == ' ') name.pop_back();
        while (!name.empty() && name.front() == ' ') name.erase(0, 1);
        int* col = name == "org" || name == "org_id" ? &org_col
                   : name == "priority"              ? &priority_col
                   : name == "payload"               ? &payload_col
                   : name == "max_attempts"          ? &attempts_col
                   : name == "queue"                 ? &queue_col
                   : name == "dedupe_key"            ? &dedupe_col
                   : name == "run_at"                ? &run_at_col
                   : name == "depends_on"            ? &depends_col
                   : name == "on_failure"            ? &on_failure_col
                   : name == "exclude_keys"          ? &exclude_keys_col
                   : name == "exclude_completers_of" ? &exclude_completers_col
                                                     : nullptr;
        if (col == nullptr) {
            bad(source, lines,
                "unknown column '" + name +
                    "' in the header (known: org, priority, payload, max_attempts, queue, "
                    "dedupe_key, run_at, depends_on, on_failure, exclude_keys, "
                    "exclude_completers_of)");
        }
        if (*col >= 0) bad(source, lines, "column '" + name + "' appears twice in the header");
        *col = static_cast<int>(i);
    }
    if (payload_col < 0) bad(source, lines, "the header has no payload column");
    if (org_col < 0 && defaults.org_id <= 0) {
        bad(source, lines, "the header has no org column: add one or pass --org");
    }

    std::vector<EnqueueRecord> out;
    std::vector<std::string> fields;
    while (true) {
        const std::size_t start = lines + 1;
        if (!next_csv_record(in, fields, lines, source)) break;
        if (fields.size() == 1 && fields[0].empty()) continue;
        if (fields.size() != header.size()) {
            bad(source, start,
                "has " + std::to_string(fields.size()) + " fields, the header has " +
                    std::to_string(header.size()));
        }
        EnqueueRecord r;
        r.line = start;
        r.org_id = defaults.org_id;
        r.job.priority = defaults.priority;
        r.job.max_attempts = defaults.max_attempts;
        r.job.payload = fields[static_cast<std::size_t>(payload_col)];
        auto number = [&](int col, const char* name) -> std::optional<std::int64_t> {
            if (col < 0) return std::nullopt;
            const std::string& text = fields[static_cast<std::size_t>(col)];
            if (text.find_first_not_of(' ') == std::string::npos) return std::nullopt;
            const auto v = parse_int(text);
            if (!v) bad(source, start, std::string(name) + " '" + text + "' is not an integer");
            return v;
        };
        const std::string& org_text =
            org_col < 0 ? std::string() : fields[static_cast<std::size_t>(org_col)];
        if (org_text.find_first_not_of(' ') != std::string::npos) {
            // The same parser, and the same words, as --org.
            const auto first = org_text.find_first_not_of(' ');
            const auto trimmed = org_text.substr(first, org_text.find_last_not_of(' ') + 1 - first);
            const auto org = base::parse_org(trimmed);
            if (!org) bad(source, start, "org " + base::org_refusal(trimmed));
            r.org_id = *org;
        } else if (defaults.org_id <= 0) {
            bad(source, start, "no organization: fill the org column or pass --org");
        }
        if (const auto v = number(priority_col, "priority")) {
            r.job.priority = as_int(*v, source, start, "priority");
        }
        if (const auto v = number(attempts_col, "max_attempts")) {
            r.job.max_attempts = as_int(*v, source, start, "max_attempts");
        }
        // A text field, trimmed; empty when the column is absent or the field blank.
        auto text = [&](int col) {
            if (col < 0) return std::string();
            const std::string& t = fields[static_cast<std::size_t>(col)];
            const auto first = t.find_first_not_of(' ');
            if (first == std::string::npos) return std::string();
            return t.substr(first, t.find_last_not_of(' ') + 1 - first);
        };
        Fields fields_of(r, source);
        if (const auto q = text(queue_col); !q.empty()) fields_of.queue(q);
        if (const auto k = text(dedupe_col); !k.empty()) fields_of.dedupe_key(k);
        if (const auto t = text(run_at_col); !t.empty()) fields_of.run_at(t);
        if (const auto p = text(on_failure_col); !p.empty()) fields_of.on_failure(p);
        if (const auto d = text(depends_col); !d.empty()) {
            r.job.depends_on = fields_of.job_ids(d, "depends_on");
            r.has_depends_on = true;
        }
        if (const auto k = text(exclude_keys_col); !k.empty()) {
            r.job.exclude_keys = list_items(k);
            r.has_exclude_keys = true;
        }
        if (const auto d = text(exclude_completers_col); !d.empty()) {
            r.job.exclude_completers_of = fields_of.job_ids(d, "exclude_completers_of");
            r.has_exclude_completers_of = true;
        }
        check_record(r, source);
        out.push_back(std::move(r));
    }
    return out;
}

std::vector<EnqueueRecord> read_jsonl(std::istream& in, const std::string& source,
                                      const RecordDefaults& defaults) {
    std::vector<EnqueueRecord> out;
    std::string line;
    std::size_t n = 0;
    while (std::getline(in, line)) {
        ++n;
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        nlohmann::json j;
        try {
            j = base::parse_bounded_json(line);
        } catch (const nlohmann::json::parse_error& e) {
            bad(source, n, std::string("not JSON: ") + e.what());
        }
        if (!j.is_object()) bad(source, n, "each line must be one JSON object");
        EnqueueRecord r;
        r.line = n;
        r.org_id = defaults.org_id;
        r.job.priority = defaults.priority;
        r.job.max_attempts = defaults.max_attempts;
        bool has_payload = false;
        bool has_org = false;
        for (const auto& [key, value] : j.items()) {
            // The binding is captured by name: clang-tidy 14 cannot parse a lambda that captures a
            // structured binding implicitly.
            auto integer = [&, &value = value](const char* name) {
                if (!value.is_number_integer())
                    bad(source, n, std::string(name) + " must be an integer");
                return value.get<std::int64_t>();
            };
            auto text_of = [&, &value = value](const char* name) {
                if (!value.is_string()) bad(source, n, std::string(name) + " must be a string");
                return value.get<std::string>();
            };
            if (key == "org" || key == "org_id") {
                r.org_id = integer("org");
                has_org = true;
            } else if (key == "priority") {
                r.job.priority = as_int(integer("priority"), source, n, "priority");
            } else if (key == "max_attempts") {
                r.job.max_attempts = as_int(integer("max_attempts"), source, n, "max_attempts");
            } else if (key == "payload") {
                r.job.payload = value.is_string() ? value.get<std::string>() : value.dump();
                has_payload = true;
            } else if (key == "queue") {
                Fields(r, source).queue(text_of(key.c_str()));
            } else if (key == "dedupe_key") {
                Fields(r, source).dedupe_key(text_of(key.c_str()));
            } else if (key == "run_at") {
                Fields(r, source).run_at(text_of(key.c_str()));
            } else if (key == "on_failure") {
                Fields(r, source).on_failure(text_of(key.c_str()));
            } else if (key == "depends_on" || key == "exclude_completers_of") {
                if (!value.is_array()) bad(source, n, key + " must be an array of job ids");
                std::vector<store::JobId> ids;
                for (const auto& id : value) {
                    if (!id.is_number_integer() || id.get<std::int64_t>() <= 0)
                        bad(source, n, key + " must be an array of job ids");
                    ids.push_back(id.get<std::int64_t>());
                }
                if (key == "depends_on") {
                    r.job.depends_on = std::move(ids);
                    r.has_depends_on = true;
                } else {
                    r.job.exclude_completers_of = std::move(ids);
                    r.has_exclude_completers_of = true;
                }
            } else if (key == "exclude_keys") {
                if (!value.is_array()) bad(source, n, "exclude_keys must be an array of key names");
                std::vector<std::string> keys;
                for (const auto& k : value) {
                    if (!k.is_string() || k.get<std::string>().empty())
                        bad(source, n, "exclude_keys must be an array of key names");
                    keys.push_back(k.get<std::string>());
                }
                r.job.exclude_keys = std::move(keys);
                r.has_exclude_keys = true;
            } else {
                bad(source, n,
                    "unknown field '" + key +
                        "' (known: org, priority, payload, max_attempts, queue, dedupe_key, "
                        "run_at, depends_on, on_failure, exclude_keys, exclude_completers_of)");
            }
        }
        if (!has_payload) bad(source, n, "no payload");
        if (!has_org && defaults.org_id <= 0) {
            bad(source, n, "no organization: add \"org\" or pass --org");
        }
        check_record(r, source);
        out.push_back(std::move(r));
    }
    return out;
}

}  // namespace aclaim::ctl
