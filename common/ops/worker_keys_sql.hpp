#pragma once

// The statements of the worker keys (schema/baseline/tables.sql): registration, the
// coordinator's batched look-up at handshake, revocation and the operator's list. Time arrives as
// $n microseconds, as in the store.

namespace aclaim::ops::sql {

/// $1 public key, $2 organization, $3 name, $4 queues as a text[] literal or '' for every queue.
/// A row only when the key was new.
inline constexpr const char* kWorkerKeyRegister = R"SQL(
INSERT INTO worker_keys (public_key, org_id, name, queues)
VALUES ($1, $2, $3, NULLIF($4, '')::text[]) ON CONFLICT (public_key) DO NOTHING RETURNING 1
)SQL";

/// $1 text[] public keys. The live ones among them, with their owner and queue limit.
inline constexpr const char* kWorkerKeyOwners = R"SQL(
SELECT public_key, org_id, name, array_to_string(queues, ',') AS queues
  FROM worker_keys WHERE public_key = ANY($1::text[]) AND revoked_at IS NULL
)SQL";

/// $1 text[] public keys. The live ones among them.
inline constexpr const char* kWorkerKeysLive = R"SQL(
SELECT public_key FROM worker_keys WHERE public_key = ANY($1::text[]) AND revoked_at IS NULL
)SQL";

/// $1 public key, $2 now. The key, when it was live.
inline constexpr const char* kWorkerKeyRevoke = R"SQL(
UPDATE worker_keys SET revoked_at = aclaim_ts($2::bigint)
 WHERE public_key = $1 AND revoked_at IS NULL RETURNING public_key
)SQL";

/// $1 name, $2 organization (0: all), $3 now. The live keys of that name.
inline constexpr const char* kWorkerKeysRevokeNamed = R"SQL(
UPDATE worker_keys SET revoked_at = aclaim_ts($3::bigint)
 WHERE name = $1 AND ($2 = 0 OR org_id = $2) AND revoked_at IS NULL RETURNING public_key
)SQL";

/// Every key, live or revoked: key, organization, name, created and revoked ('' when live) as text.
inline constexpr const char* kWorkerKeyList = R"SQL(
SELECT public_key, org_id, name, aclaim_us(created_at), aclaim_us(revoked_at),
       coalesce(array_to_string(queues, ','), '')
  FROM worker_keys ORDER BY org_id, name, created_at
)SQL";

}  // namespace aclaim::ops::sql
