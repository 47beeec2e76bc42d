/*
 * The assignment protocol of aclaim as a Promela model for SPIN, checked exhaustively by
 * check.sh beside it: one run per fault class (its bounds in README.md: MAXATT=1 and L=1 where a
 * fault class is added), then each variant below, which must leave a trail. Each transition's
 * comment names the statement that implements it (docs/guarantees.md maps them all).
 *
 * What is modeled
 *   - One job row, the only authority: state, generation (the fencing token), assignee, lease
 *     and attempts. Every statement on it is one atomic step, as it is in PostgreSQL: each of
 *     them locks the row (FOR UPDATE / FOR NO KEY UPDATE) and re-evaluates its WHERE on the
 *     current version, so on one row they are serial in commit order.
 *   - Workers: claim, renew, complete, fail (retryable or final), release; they keep the
 *     generation they were given, re-send a COMPLETE/FAIL/RELEASE/RENEW whose reply is lost or
 *     answered not_committed / outcome_unknown (to either coordinator: the session may move),
 *     and never re-send a CLAIM. A worker's process may die and a new one start under the same
 *     name (the row's assignee) on the other coordinator, knowing nothing of the old one's
 *     requests, which may still be on their way; replies to the old process go nowhere.
 *   - Coordinators: each takes one request and coalesces the next waiting request of the same
 *     kind into one transaction, as the work queue does; the transaction commits, or the
 *     coordinator dies before the commit or between the commit and the replies (its queued
 *     requests die with it), or its connection breaks at the commit: the commit happened or not,
 *     and the answer is taken from the row afterwards (commit resolution).
 *   - The reaper: reclaims a lease that is expired by a coordinator's clock, and pushes REVOKED.
 *   - An operator cancel, once, at any moment.
 *   - Time: one tick process. The lease end is stored as the ticks left on the true clock;
 *     coordinator c's clock runs SKEW(c) ticks ahead, so it sees the lease live while more than
 *     SKEW(c) ticks are left, and a lease it grants or renews ends L + SKEW(c) ticks from now.
 *     Nothing bounds when workers act, so every relation of worker speed to lease length is
 *     covered, and the coordinators disagree by D ticks.
 *   - The network: requests and replies may be lost, duplicated, or overtaken (a channel's head
 *     moved behind the next message); every request may also be delayed arbitrarily, and a
 *     worker may give up waiting while its reply is still on the way.
 *   - A lossy failover: a standby copy of the row, replicated at arbitrary points; the failover
 *     makes it the primary (losing every commit since the last replication) on timeline 2, and
 *     a claim grants max(generation + 1, (timeline - 1) * K + 1): the fencing epoch, with K
 *     standing in for 2^32.
 *
 * Properties
 *   P1 at most one accepted completion per job (in the history the database kept);
 *   P2 a completion is accepted only from the holder of the job's current generation (the
 *      process the grant went to, not only a process of the same name), while that claim's
 *      lease is live by the deciding coordinator's clock: no stale completion;
 *   P3 no fencing token (job, generation) is granted twice, in any history: so no token is ever
 *      held by two workers;
 *   P4 a renewal extends only the live lease of the current generation, held by the renewer:
 *      never a completed, failed, reclaimed, released or cancelled one;
 *   P5 a worker is answered ACCEPTED only for a transition the row shows committed (checked where
 *      the worker takes the answer, against a ghost record of what committed), and not_committed
 *      only for one that did not commit (or was lost with a failover since);
 *   P6 (LIVE build, weak fairness) every job ends: completed, failed, discarded or cancelled,
 *      and stays so (<>[] ended).
 *   P1-P5 are assertions, checked in every state of the safety run and of the liveness run; each
 *   carries its property's tag in a comment on its line (check.sh reads the tag of the assertion
 *   a trail violates), and the model's own bounds carry the tag "bound".
 *
 * Bounds (defaults; each a -D macro): 2 workers, 2 coordinators, 1 job, lease L = 2 ticks,
 * skew D = 1 tick, batches of 2, MAXATT = 2 attempts, K = 4 generations per timeline (so
 * generations stay below 9), and over a whole run at most LOSS = 1 lost message, DUPS = 1
 * duplicate, REORDERS = 1 overtaking, EARLY = 1 early give-up, CRASHES = 1 coordinator death,
 * INDOUBT = 1 interrupted commit, FAILOVERS = 1 lossy failover, RESTARTS = 1 worker restart,
 * CANCELS = 1 cancel, RENEWS = 1 renewal and RELEASES = 1 release. The budgets keep the state space finite and make
 * the liveness property meaningful: an adversary with unbounded faults can starve any protocol.
 *
 * Abstracted away: organizations, queues, priorities and claim order (one job); sessions and
 * HELLO (a lease does not name its session); payloads and result references (one result per
 * worker and generation); run deadlines, backoff and scheduled jobs (retries are pending at
 * once); quarantine and operator retry; the outbox and consumer groups (they commit with the
 * transition they record); NOTIFY wake-ups (long-poll is modeled as a claim that may be
 * answered NO_WORK); the audit log except for the count of accepted completions; split brain,
 * which the HA manager prevents (docs/guarantees.md).
 *
 * Variants, each removing one safeguard; each must yield a counterexample that violates the
 * property named here, and no other check (check.sh):
 *   NO_STATE_FENCE        P1  a completed row still fences a completion: the completion's fence
 *                             omits state = 'assigned' and the completion keeps the lease (either
 *                             guard alone keeps a completed row terminal); a duplicate completes
 *                             the job twice
 *   NO_GEN_BUMP           P2  the claim of a reclaimed job keeps its generation; a restarted
 *                             worker's completion of its reclaimed claim is accepted against the
 *                             new grant under its name (P3's checks, which read the mutation
 *                             straight back, are left out of this variant)
 *   NO_GEN_CHECK          P2  the completion's fence omits the token (generation and assignee)
 *   NO_EPOCH              P3  the claim ignores the timeline: generation + 1 after a failover too
 *   NO_RENEW_GEN_CHECK    P4  the renewal's fence omits the token (generation and assignee)
 *   NO_COMMIT_RESOLUTION  P5  a batch whose commit broke is answered with the statement's own
 *                             answers, the row never read again: a completion that did not
 *                             commit is answered ACCEPTED
 *   NO_REAP               P6  no reaper: an expired lease is never taken back, so a job whose
 *                             holder's completion came too late stays assigned for ever
 */

#ifndef NW
#define NW 2
#endif
#ifndef NC
#define NC 2
#endif
#ifndef L
#define L 2
#endif
#ifndef D
#define D 1
#endif
#ifndef MAXATT
#define MAXATT 2
#endif
#ifndef K
#define K 4
#endif
#ifndef LOSS
#define LOSS 1
#endif
#ifndef DUPS
#define DUPS 1
#endif
#ifndef REORDERS
#define REORDERS 1
#endif
#ifndef EARLY
#define EARLY 1
#endif
#ifndef CRASHES
#define CRASHES 1
#endif
#ifndef INDOUBT
#define INDOUBT 1
#endif
#ifndef FAILOVERS
#define FAILOVERS 1
#endif
#ifndef CANCELS
#define CANCELS 1
#endif
#ifndef RENEWS
#define RENEWS 1
#endif
#ifndef RELEASES
#define RELEASES 1
#endif
#ifndef RESTARTS
#define RESTARTS 1
#endif

#define B 2              /* requests per coalesced transaction */
#ifndef QCAP
#define QCAP 6    /* channel capacity; an assertion proves it is never reached */
#endif
#define GMAX (2 * K)     /* highest generation two timelines can grant */
#define NOBODY NW
#define SKEW(c) ((c) * D)
/* A session s is worker NAME(s)'s process: s = w at the start, s = w + NW after its restart. The
 * row's assignee is the name; replies go to a session. A restarted worker connects to the next
 * endpoint of its list, the other coordinator. */
#define NAME(s) ((s) % NW)
#define HOME(s) (((s) + (s) / NW) % NC)   /* the coordinator a session starts on */

/* Row states. Every state from ST_COMPLETED on is terminal. */
#define ST_PENDING 0
#define ST_ASSIGNED 1
#define ST_COMPLETED 2
#define ST_FAILED 3
#define ST_DISCARDED 4
#define ST_CANCELLED 5

mtype = { CLAIM, RENEW, COMPLETE, FAIL_RETRY, FAIL_FINAL, RELEASE,   /* worker -> coordinator */
          ASSIGNED, NO_WORK, LEASE, REVOKED, ACCEPTED, REJECTED, RESEND, /* coordinator -> worker */
          NONE };

typedef Row {
    byte st;    /* state */
    byte gen;   /* generation: the fencing token */
    byte who;   /* assignee; kept by completed, failed and discarded rows */
    byte left;  /* ticks until lease_expires_at on the true clock; 0 once there is no lease */
    byte att;   /* attempts */
    byte done   /* completed events in this history's job_events (P1) */
};

Row db;          /* the primary's row */
Row sb;          /* the standby's copy, as of the last replication */
byte tl = 1;     /* the primary's timeline */

/* Ghosts: facts about the world, not the database, so a failover does not roll them back. */
bit granted[GMAX + 1];   /* P3: every generation ever granted, in any history */
byte holder[GMAX + 1];   /* to which session */
/* P5: how the claim of each generation ended by a committed transition, in any history (bits):
 * 1 its holder's COMPLETE; 2 its holder's FAIL or RELEASE, or the reaper's discard once its
 * attempts were used up (which the product answers a FAIL of that claim ACCEPTED for: the row
 * shows the job ended, discarded, at that generation and assignee, as the FAIL would have left
 * it; store::diagnose). */
byte settled[GMAX + 1];

byte sess[NW];           /* each worker's current session (its process) */

/* Fault budgets, shared by all processes. */
byte loss = LOSS, dups = DUPS, reorders = REORDERS, early = EARLY;
byte crashes = CRASHES, indoubt = INDOUBT, renews = RENEWS, releases = RELEASES;
byte restarts = RESTARTS;

chan to_c[NC] = [QCAP] of { mtype, byte, byte };   /* kind, session, generation */
chan to_w[NW] = [QCAP] of { mtype, byte };         /* kind, generation: to a worker's process */

/* The batch each coordinator is working on (global so that a worker's give-up can see that a
 * request of its own is still being served) and the replies it decided. */
mtype bk[NC];
byte bn[NC];
byte bw[NC * B];
byte bg[NC * B];
mtype rk[NC * B];
byte rg[NC * B];

#define ended (db.st >= ST_COMPLETED)
#define live(c) (db.st == ST_ASSIGNED && db.left > SKEW(c))
#define inbatch(c, s) (bn[c] > 0 && (bw[(c) * B] == (s) || (bn[c] > 1 && bw[(c) * B + 1] == (s))))
/* Nothing of session s is on its way: its reply timeout is then no guess. */
#define quiet(s) (len(to_w[NAME(s)]) == 0 && !(to_c[0]??[_, eval(s), _]) \
                  && !(to_c[1]??[_, eval(s), _]) && !inbatch(0, s) && !inbatch(1, s))

inline copy_row(to, from) {
    to.st = from.st; to.gen = from.gen; to.who = from.who;
    to.left = from.left; to.att = from.att; to.done = from.done
}

/* A message on the network: lost (budget), delivered, or delivered twice (budget). */
inline net_to_c(c, t, w, g) {
    if
    :: loss > 0 -> loss--
    :: true ->
        assert(len(to_c[c]) < QCAP); to_c[c]!t, w, g;                         /* bound */
        if
        :: dups > 0 -> dups--; assert(len(to_c[c]) < QCAP); to_c[c]!t, w, g  /* bound */
        :: true
        fi
    fi
}

/* To session s: a reply to a process that is gone (the worker restarted) goes nowhere. */
inline net_to_w(s, t, g) {
    if
    :: sess[NAME(s)] != s
    :: sess[NAME(s)] == s && loss > 0 -> loss--
    :: sess[NAME(s)] == s ->
        assert(len(to_w[NAME(s)]) < QCAP); to_w[NAME(s)]!t, g;                 /* bound */
        if
        :: dups > 0 -> dups--; assert(len(to_w[NAME(s)]) < QCAP); to_w[NAME(s)]!t, g  /* bound */
        :: true
        fi
    fi
}

/* ---- the statements, each one atomic step on the row (sql:: names in common/store) ---- */

/* The fence every transition of a held job shares: state = 'assigned' AND generation = $g
 * AND assignee = $w AND lease_expires_at > $now. */
#define fenced(c, s, g) (live(c) && db.gen == (g) && db.who == NAME(s))

/* The claim (common/store/claim_plan.hpp, every plan): a pending job becomes assigned at the
 * next generation, or at the first one of the current timeline's range when that is higher
 * (schema/baseline/tables.sql). */
inline claim() {
    if
    :: db.st == ST_PENDING ->
#ifdef NO_EPOCH
        nx = db.gen + 1;
#else
        nx = ((tl - 1) * K + 1 > db.gen + 1 -> (tl - 1) * K + 1 : db.gen + 1);
#endif
#ifdef NO_GEN_BUMP
        if :: reclaimed -> nx = db.gen :: else fi;
#endif
        assert(nx <= tl * K);                 /* bound: the timeline's range is never exhausted */
#ifndef NO_GEN_BUMP
        /* That variant grants a token twice by construction: its run shows what that lets through
         * (P2), so the P3 checks, the variant's own mutation read back, are left out of it. */
        assert(!granted[nx]);                 /* P3 */
#endif
        granted[nx] = 1; holder[nx] = rw;
        db.st = ST_ASSIGNED; db.gen = nx; db.who = NAME(rw); db.left = L + SKEW(c); db.att++;
#ifdef NO_GEN_BUMP
        reclaimed = 0;
#endif
        rk[slot] = ASSIGNED; rg[slot] = nx
    :: else -> rk[slot] = NO_WORK; rg[slot] = 0
    fi
}

#ifdef NO_GEN_BUMP
bit reclaimed;   /* the row came back by a reclaim, which this variant does not fence */
#endif

/* sql::kRenew / kRenewBatch. */
inline renew() {
    if
#ifdef NO_RENEW_GEN_CHECK
    :: live(c) ->
#else
    :: fenced(c, rw, rgen) ->
#endif
        assert(db.st == ST_ASSIGNED && db.gen == rgen && holder[rgen] == rw);   /* P4 */
        db.left = L + SKEW(c);
        rk[slot] = LEASE
    :: else -> rk[slot] = REVOKED
    fi;
    rg[slot] = rgen
}

/* sql::kComplete / kCompleteBatch; a refused one is answered from the row (kAuthority,
 * store::diagnose): the same completion already committed is ACCEPTED, replayed. Two guards make
 * a completed row refuse another completion: the fence's state = 'assigned' and the lease the
 * completion clears (lease_expires_at = NULL); NO_STATE_FENCE drops both. */
inline complete() {
    if
#if defined(NO_GEN_CHECK)
    :: live(c) ->
#elif defined(NO_STATE_FENCE)
    :: db.left > SKEW(c) && db.gen == rgen && db.who == NAME(rw) ->
#else
    :: fenced(c, rw, rgen) ->
#endif
        assert(db.done == 0);                                                     /* P1 */
        assert(db.gen == rgen && holder[rgen] == rw && db.left > SKEW(c));       /* P2 */
        db.st = ST_COMPLETED; db.done++; settled[rgen] = settled[rgen] | 1;
#ifndef NO_STATE_FENCE
        db.left = 0;
#endif
        rk[slot] = ACCEPTED
    :: else ->
        rk[slot] = (db.st == ST_COMPLETED && db.gen == rgen && db.who == NAME(rw) -> ACCEPTED
                                                                              : REJECTED)
    fi;
    rg[slot] = rgen
}

/* sql::kFail: retryable, the attempt is used and the job is pending again or, its attempts
 * used up, discarded (retry_or_discard); final, failed. */
inline fail(retry) {
    if
    :: fenced(c, rw, rgen) ->
        if
        :: retry && db.att < MAXATT -> db.st = ST_PENDING; db.who = NOBODY
        :: retry && db.att >= MAXATT -> db.st = ST_DISCARDED
        :: else -> db.st = ST_FAILED
        fi;
        db.left = 0; settled[rgen] = settled[rgen] | 2;
        rk[slot] = ACCEPTED
    :: else ->
        rk[slot] = ((db.st == ST_FAILED || db.st == ST_DISCARDED) && db.gen == rgen
                    && db.who == NAME(rw) -> ACCEPTED : REJECTED)
    fi;
    rg[slot] = rgen
}

/* sql::kRelease: back to pending, the attempt given back. */
inline release() {
    if
    :: fenced(c, rw, rgen) ->
        db.st = ST_PENDING; db.who = NOBODY; db.left = 0; db.att--;
        settled[rgen] = settled[rgen] | 2;
        rk[slot] = ACCEPTED
    :: else -> rk[slot] = REJECTED
    fi;
    rg[slot] = rgen
}

/* One transaction of coordinator c over its batch, in batch order. */
inline apply_batch(c) {
    i = 0;
    do
    :: i < bn[c] ->
        slot = c * B + i; rw = bw[slot]; rgen = bg[slot];
        if
        :: bk[c] == CLAIM -> claim()
        :: bk[c] == RENEW -> renew()
        :: bk[c] == COMPLETE -> complete()
        :: bk[c] == FAIL_RETRY -> fail(1)
        :: bk[c] == FAIL_FINAL -> fail(0)
        :: bk[c] == RELEASE -> release()
        fi;
        i++
    :: else -> break
    od;
    i = 0; slot = 0; rw = 0; rgen = 0; nx = 0
}

/* coordinator::resolve_interrupted (commit_resolution.cpp) over the row read after the
 * connection came back: Applied is answered as the replayed transition, NotApplied as ERROR
 * not_committed and Unknown as ERROR outcome_unknown; the worker re-sends on both errors. A
 * claim whose commit is in doubt is answered NO_WORK (its lease, if it was granted, runs out),
 * a renewal ERROR (it is re-sent). */
inline resolve_batch(c, was_applied, tl_then) {
    j = 0;
    do
    :: j < bn[c] ->
        rw = bw[c * B + j]; rgen = bg[c * B + j];
        rg[c * B + j] = rgen;
        if
        :: bk[c] == CLAIM -> rk[c * B + j] = NO_WORK
        :: bk[c] == RENEW -> rk[c * B + j] = RESEND
        :: bk[c] == COMPLETE && db.st == ST_COMPLETED && db.gen == rgen && db.who == NAME(rw) ->
            rk[c * B + j] = ACCEPTED
        :: ((bk[c] == FAIL_RETRY || bk[c] == FAIL_FINAL) &&
            (db.st == ST_FAILED || db.st == ST_DISCARDED) && db.gen == rgen && db.who == NAME(rw)) ->
            rk[c * B + j] = ACCEPTED
        :: else ->
            /* Not applied by the row's reading: NotApplied when the row proves it, else Unknown.
             * A COMPLETE or final FAIL would have left the row terminal at g for good; a RELEASE
             * or retryable FAIL leaves it pending at g, as a reclaim does. */
            if
            :: bk[c] == COMPLETE || bk[c] == FAIL_FINAL ->
                /* rk still holds the statement's own answer: a statement that matched no row
                 * commits nothing, so only an ACCEPTED one must show on the row. */
                assert(!(was_applied && rk[c * B + j] == ACCEPTED && tl == tl_then))   /* P5 */
            :: else ->
                if
                :: db.gen == rgen && (db.st == ST_ASSIGNED || db.st == ST_COMPLETED) ->
                    /* NotApplied: only a row still assigned or completed at g proves it (a
                     * cancel may move a released row on without a claim). */
                    assert(!(was_applied && rk[c * B + j] == ACCEPTED && tl == tl_then)) /* P5 */
                :: else
                fi
            fi;
            rk[c * B + j] = RESEND
        fi;
        j++
    :: else -> break
    od;
    j = 0; rw = 0; rgen = 0
}

inline send_replies(c) {
    k = 0;
    do
    :: k < bn[c] -> net_to_w(bw[c * B + k], rk[c * B + k], rg[c * B + k]); k++
    :: else -> break
    od;
    k = 0;
    bn[c] = 0
}

#ifdef NO_COMMIT_RESOLUTION
/* The variant's answers to a batch whose commit broke and did not happen: a completion the
 * statement matched is answered with the statement's own ACCEPTED, the row never read again;
 * every other request as the resolution would answer one it cannot prove (claims NO_WORK, the
 * rest re-sent). */
inline own_answers(c) {
    j = 0;
    do
    :: j < bn[c] ->
        rw = bw[c * B + j]; rgen = bg[c * B + j];
        rg[c * B + j] = rgen;
        if
        :: bk[c] == CLAIM -> rk[c * B + j] = NO_WORK
        :: bk[c] == COMPLETE && fenced(c, rw, rgen) -> rk[c * B + j] = ACCEPTED
        :: else -> rk[c * B + j] = RESEND
        fi;
        j++
    :: else -> break
    od;
    j = 0; rw = 0; rgen = 0
}
#endif

/* A coordinator process dies: its batch and the requests queued on its socket are gone. */
inline die(c) {
    bn[c] = 0;
    do
    :: to_c[c]?_, _, _
    :: len(to_c[c]) == 0 -> break
    od
}

proctype Coordinator(byte c) {
    mtype t;
    byte w, g;
    bit applied;
    byte tl_then;
    bit phase;      /* 1: the commit was in doubt */
    byte i, j, k, nx, rw, rgen, slot;   /* the inlines' scratch, zeroed after use */
end:
    do
    :: atomic {
        to_c[c]?t, w, g ->
            bk[c] = t; bw[c * B] = w; bg[c * B] = g; bn[c] = 1;
            /* The next waiting request of the same kind joins the transaction. */
            if
            :: to_c[c]??[eval(t), _, _] ->
                to_c[c]??eval(t), w, g; bw[c * B + 1] = w; bg[c * B + 1] = g; bn[c] = 2
            :: else
            fi;
            t = NONE; w = 0; g = 0;
            if
            :: apply_batch(c)                      /* commits */
            :: crashes > 0 ->                      /* dies before the commit, or after it */
                crashes--;
                if :: apply_batch(c) :: skip fi;
                die(c)
            :: indoubt > 0 ->                      /* the connection breaks at the commit */
                indoubt--; tl_then = tl; phase = 1;
#ifdef NO_COMMIT_RESOLUTION
                if :: apply_batch(c); applied = 1 :: own_answers(c); applied = 0 fi
#else
                if :: apply_batch(c); applied = 1 :: applied = 0 fi
#endif
            fi
       };
       /* The replies leave after the commit; in doubt, after the row was read again. */
       atomic {
            if
#ifdef NO_COMMIT_RESOLUTION
            :: phase == 1 -> applied = 0; tl_then = 0; phase = 0   /* the answers stand as they are */
#else
            :: phase == 1 -> resolve_batch(c, applied, tl_then); applied = 0; tl_then = 0; phase = 0
#endif
            :: else
            fi;
            send_replies(c)
       }
    :: reorders > 0 && len(to_c[c]) >= 2 ->
        atomic { reorders--; to_c[c]?t, w, g; to_c[c]!t, w, g; t = NONE; w = 0; g = 0 }
    od
}

proctype Worker(byte w) {   /* w: the worker's name; sess[w] its process of the moment */
    byte held;        /* generation held, 0: none */
    mtype out = NONE; /* the request awaiting its reply */
    mtype t;
    byte g;
end:
    do
    :: atomic {
        /* A new claim waits until every earlier reply is in: the worker library tells replies
         * apart by request id, which this model has not, so a late NO_WORK is never taken for
         * the answer to a newer claim. */
        out == NONE && held == 0 && quiet(sess[w]) ->
            out = CLAIM;
            net_to_c(HOME(sess[w]), CLAIM, sess[w], 0)
        }
    :: atomic {
        out == NONE && held != 0 ->
            if
            :: renews > 0 -> renews--; out = RENEW
            :: out = COMPLETE
            :: out = FAIL_RETRY
            :: out = FAIL_FINAL
            :: releases > 0 -> releases--; out = RELEASE
            fi;
            net_to_c(HOME(sess[w]), out, sess[w], held)
        }
    :: atomic {
        to_w[w]?t, g ->
            if
            :: t == ASSIGNED ->
                /* A late grant while holding the job is left to expire. */
                if
                :: held == 0 ->
#ifndef NO_GEN_BUMP
                    assert(holder[g] == sess[w]);                                      /* P3 */
#endif
                    held = g;
                                if :: out == CLAIM -> out = NONE :: else fi
                :: else
                fi
            :: t == NO_WORK -> if :: out == CLAIM -> out = NONE :: else fi
            :: t == LEASE -> if :: g == held && out == RENEW -> out = NONE :: else fi
            :: t == REVOKED || t == ACCEPTED || t == REJECTED ->
                if
                :: g == held && g != 0 ->
                    assert(t != ACCEPTED || (settled[g] & (out == COMPLETE -> 1 : 2)) != 0); /* P5 */
                    held = 0; out = NONE
                :: else
                fi
            :: t == RESEND ->
                if
                :: g == held && g != 0 && out != NONE && out != CLAIM ->
                    if :: net_to_c(0, out, sess[w], held) :: net_to_c(1, out, sess[w], held) fi
                :: else
                fi
            fi;
            t = NONE; g = 0
        }
    :: atomic {
        /* The reply timeout: nothing is coming, or (budget) the worker gives up early. The
         * guard is inside the atomic step, so the budget it tested is the one it spends. */
        out != NONE && (quiet(sess[w]) || early > 0) ->
            if :: !quiet(sess[w]) -> early-- :: else fi;
            if
            :: out == CLAIM -> out = NONE      /* never re-sent: its grant, if any, expires */
            :: else -> if :: net_to_c(0, out, sess[w], held) :: net_to_c(1, out, sess[w], held) fi
            fi
        }
    :: atomic {
        /* The process dies (budget) and a new one starts under the same name, knowing nothing:
         * the old one's requests may still be on their way, and its replies go nowhere. */
        restarts > 0 ->
            restarts--;
            sess[w] = w + NW; held = 0; out = NONE;
            do
            :: to_w[w]?_, _
            :: len(to_w[w]) == 0 -> break
            od
        }
    :: reorders > 0 && len(to_w[w]) >= 2 ->
        atomic { reorders--; to_w[w]?t, g; to_w[w]!t, g; t = NONE; g = 0 }
    od
}

/* sql::kReclaim, run by every coordinator's reaper; the fastest clock (SKEW(NC - 1)) is the
 * first to see a lease expired, and a slower one sees it later or not before a renewal. */
proctype Reaper() {
    byte w, g;
end:
    do
    :: atomic {
        db.st == ST_ASSIGNED && db.left <= SKEW(NC - 1) ->
            w = db.who;
            if
            :: db.att >= MAXATT -> db.st = ST_DISCARDED; settled[db.gen] = settled[db.gen] | 2
            :: else -> db.st = ST_PENDING; db.who = NOBODY
            fi;
            db.left = 0;
#ifdef NO_GEN_BUMP
            reclaimed = 1;
#endif
            g = db.gen;
            net_to_w(sess[w], REVOKED, g);
            w = 0; g = 0
       }
    od
}

/* Time: every lease, the primary's and the standby's copy, comes one tick closer to its end. */
proctype Clock() {
end:
    do
    :: atomic {
        (db.left > 0 || sb.left > 0) ->
            if :: db.left > 0 -> db.left-- :: else fi;
            if :: sb.left > 0 -> sb.left-- :: else fi
       }
    od
}

/* aclaim_cancel_jobs (schema/definitions/functions/aclaim_cancel_jobs.sql), or never. */
proctype Operator() {
    byte w, g;
    if
    :: CANCELS > 0 ->
        atomic {
            (db.st == ST_PENDING || db.st == ST_ASSIGNED) ->
                w = db.who;
                db.st = ST_CANCELLED; db.left = 0;
                g = db.gen;
                if :: w != NOBODY -> net_to_w(sess[w], REVOKED, g) :: else fi
        }
    :: skip
    fi
}

/* Asynchronous replication and a lossy failover, or none: the standby is replicated at
 * arbitrary points and may be promoted at any moment, losing every commit since. */
proctype Replication() {
    if :: FAILOVERS == 0 -> goto idle :: else fi;
end:
    do
    :: atomic { copy_row(sb, db) }
    :: FAILOVERS > 0 ->
        atomic {
            copy_row(db, sb);
            tl = 2
        };
        break
    :: break
    od;
idle:
    atomic { sb.st = 0; sb.gen = 0; sb.who = 0; sb.left = 0; sb.att = 0; sb.done = 0 }
}

init {
    atomic {
        db.st = ST_PENDING; db.who = NOBODY;
        copy_row(sb, db);          /* the enqueue was replicated */
        byte c;
        for (c : 0 .. NW - 1) { sess[c] = c }
        for (c : 0 .. NC - 1) { run Coordinator(c) }
        for (c : 0 .. NW - 1) { run Worker(c) }
#ifndef NO_REAP
        run Reaper();
#endif
        run Clock(); run Operator(); run Replication()
    }
}

#ifdef LIVE
ltl ends { <> [] ended }
#endif
