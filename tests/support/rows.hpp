#pragma once

// Reading rows back in tests: the whole state of a job, its results and its events, as text, so
// that "changed nothing" can be asserted by comparing snapshots.

#include <pqxx/pqxx>
#include <string>

#include "common/store/assignment.hpp"

namespace aclaim::testing {

/// The one value of the one row `sql` returns, read in a transaction of its own.
template <class T, class... Params>
T read_one(pqxx::connection& c, const std::string& sql, const Params&... params) {
    pqxx::read_transaction t(c);
    return t.exec_params1(sql, params...)[0].template as<T>();
}

/// Every column of the job row, as one text value; empty when there is no such job.
inline std::string job_snapshot(pqxx::connection& c, store::JobId id) {
    pqxx::read_transaction t(c);
    auto r = t.exec_params("SELECT j::text FROM jobs j WHERE id = $1", id);
    return r.empty() ? "" : r[0][0].as<std::string>();
}

/// The job's published result rows, as text.
inline std::string results_snapshot(pqxx::connection& c, store::JobId id) {
    return read_one<std::string>(c,
                                 "SELECT coalesce(string_agg(r::text, ';' ORDER BY generation), "
                                 "'') FROM job_results r WHERE job_id = $1",
                                 id);
}

/// How many events of a kind the job has.
inline long event_count(pqxx::connection& c, store::JobId id, const std::string& kind) {
    return read_one<long>(c, "SELECT count(*) FROM job_events WHERE job_id = $1 AND kind = $2", id,
                          kind);
}

inline std::string job_state(pqxx::connection& c, store::JobId id) {
    return read_one<std::string>(c, "SELECT state FROM jobs WHERE id = $1", id);
}

inline store::Generation job_generation(pqxx::connection& c, store::JobId id) {
    return read_one<long>(c, "SELECT generation FROM jobs WHERE id = $1", id);
}

}  // namespace aclaim::testing
