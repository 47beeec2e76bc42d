-- The console's signed-in sessions, kept in the database so that every console process serving it
-- knows each one: several consoles behind a load balancer, or one restarted, keep an operator
-- signed in.
--
-- token_hash: the SHA-256 of the cookie's token, in hex. The token itself is never stored, so
-- that reading this table (a backup, a replica) signs nobody in. csrf: the session's CSRF token,
-- which the page sends back on every POST; it is worth nothing without the cookie. expires_at:
-- the end of the idle time, pushed forward while the session is used. Removing an operator
-- removes its sessions (the foreign key); a disabled operator's are found no more (the console
-- reads the account with each session); `operator add` resetting an account removes them.
--
-- Only the console's login role, the table's owner, reads it: no grant to aclaim_coordinator
-- or aclaim_producer, and row-level security with no policy, so that a grant added by mistake
-- still shows nothing.
CREATE TABLE console_sessions (
    token_hash text        PRIMARY KEY CHECK (token_hash ~ '^[0-9a-f]{64}$'),
    operator   text        NOT NULL REFERENCES console_operators (name)
                           ON DELETE CASCADE ON UPDATE CASCADE,
    csrf       text        NOT NULL,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);

-- The operator's sessions, for the foreign key's cascade and `operator add`'s revocation; the
-- expired ones, oldest first, for the pruning at each sign-in.
CREATE INDEX console_sessions_operator ON console_sessions (operator);
CREATE INDEX console_sessions_expires_at ON console_sessions (expires_at);

ALTER TABLE console_sessions ENABLE ROW LEVEL SECURITY;
REVOKE ALL ON console_sessions FROM PUBLIC;
