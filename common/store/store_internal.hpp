#pragma once

// What the store's sources share (assignment_store.cpp, claim_store.cpp,
// fenced_transitions.cpp): the row-security scope of a transaction, reading a row's authority,
// and the coalesced completion that both complete_batch and complete_and_claim run. Not part of
// the store's interface.

#include <cstdint>
#include <optional>
#include <pqxx/pqxx>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/store/assignment.hpp"
#include "common/store/statement.hpp"

namespace aclaim::store::detail {

JobState state_of(const pqxx::field& f);

/// What the rest of a transaction may see when the store runs under row-level security: one
/// organization, or all of them. Does nothing otherwise. Set only when it changes.
class Scope {
  public:
    Scope(pqxx::transaction_base& txn, bool enabled) : txn_(txn), enabled_(enabled) {}
    void to(OrgId org) { set(std::to_string(org)); }
    void all();
    /// The transaction is scoped to org already (its scope statement went out another way).
    void scoped_to(OrgId org) {
        if (enabled_) current_ = std::to_string(org);
    }

  private:
    void set(const std::string& value);
    pqxx::transaction_base& txn_;
    bool enabled_;
    std::string current_;
};

/// A row of kAuthority.
RowAuthority authority_of(const pqxx::row& r);

/// The current rows of `jobs` that exist, by id: kAuthority, or with `shared` kAuthorityShared,
/// which waits for a transaction holding one of them to end.
std::unordered_map<JobId, RowAuthority> read_authorities(pqxx::transaction_base& txn,
                                                         const std::vector<std::int64_t>& jobs,
                                                         bool shared);

std::optional<RowAuthority> row_of(const std::unordered_map<JobId, RowAuthority>& rows, JobId job);

/// The arrays of a coalesced renew or complete, one element per request.
struct TransitionArrays {
    std::string orgs, jobs, generations, workers, result_refs;
};

/// The requests at `indices`, as arrays.
TransitionArrays arrays_of(std::span<const TransitionRequest> requests,
                           const std::vector<std::size_t>& indices);

/// The requests one coalesced statement may carry: all of them together, or under row-level
/// security one group per organization (in order of first appearance), as a transaction scoped to
/// one organization sees no other.
std::vector<std::vector<std::size_t>> statement_groups(std::span<const TransitionRequest> requests,
                                                       bool by_organization);

/// Marks the requests of `group` that a kCompleteBatch result `r` applied. With `seen`, also keeps
/// the row the statement locked for each request it did not apply, to decide its refusal on.
void mark_completed(const pqxx::result& r, const std::vector<std::size_t>& group,
                    std::vector<bool>& applied, std::vector<Transition>& out,
                    std::vector<std::optional<RowAuthority>>* seen = nullptr);

/// The completions a coalesced statement did not apply, answered as complete() would answer
/// them (a duplicate tried once more on its own). `known`: as settle_unapplied's.
void settle_completions(pqxx::transaction_base& txn, Scope& scope,
                        std::span<const TransitionRequest> requests,
                        const std::vector<bool>& applied, base::Instant now,
                        std::vector<Transition>& out,
                        std::span<const std::optional<RowAuthority>> known = {});

/// complete_batch's statements in `txn`, without the commit.
std::vector<Transition> complete_in(pqxx::work& txn, Scope& scope, bool row_security,
                                    std::span<const TransitionRequest> requests, base::Instant now);

}  // namespace aclaim::store::detail
