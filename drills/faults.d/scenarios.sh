# shellcheck shell=bash disable=SC2154,SC2034
# The scenarios of drills/faults, sourced by it. Each runs on a fresh database, injects its fault
# while jobs drain, waits on observed state only (rows, events, log lines) within a bound, and
# ends with scenario_end (aclaimctl check, the summary line, the result-file cross-check).
# `scale` multiplies job and fault counts (1 for --short); `drain_s` bounds every drain.

# Progress marker: the completed count that the next fault waits for. Each fault waits for some
# progress since the previous one (the system recovered), and the job counts leave work for all.
next_step() { echo $(($(completed) + $1)); }
# progressed TARGET: that many jobs completed, or nothing left to do.
progressed() { local n; n=$(completed) && { [ "$n" -ge "$1" ] || is_drained; }; }

# ---- repeated SIGKILL of random workers ------------------------------------------------------
scenario_worker_kills() {
  local per_org=$((200 * scale)) kills=$((5 * scale))
  scenario_begin worker_kills "SIGKILL $kills random workers that hold jobs while $((2 * per_org)) jobs of two organizations drain (5% of reviews fail, retryably); each is replaced"
  enqueue 1 "$per_org" 50
  enqueue 2 "$per_org" 50
  local port
  port=$(free_port)
  start_coordinator coordinator "$port" || { scenario_end; return; }
  local -a cur=() org=(1 1 2 2) victims=()
  local slot
  for slot in 0 1 2 3; do
    cur[slot]="o${org[slot]}-w$slot.0"
    start_worker "${cur[slot]}" "${org[slot]}" "$port" --concurrency 4 --review-ms 300 --review-dist lognormal --fail-rate 0.05
  done
  local k step=15 killed=0 held_at_death=0 kills_holding=0 held target try
  for k in $(seq "$kills"); do
    target=$(next_step "$step")
    wait_for "$drain_s" progressed "$target" || break
    is_drained && break
    # A kill must hit a holder: freeze a random worker, and kill it only if it still holds a job
    # once frozen (one that finished its jobs just before the freeze goes on).
    for try in $(seq 100); do
      slot=$((RANDOM % 4))
      if [ "$(held_by "${cur[slot]}")" -gt 0 ]; then
        signal_one "${cur[slot]}" STOP
        [ "$(held_by "${cur[slot]}")" -gt 0 ] && break
        signal_one "${cur[slot]}" CONT
      fi
      sleep 0.05
    done
    kill_one "${cur[slot]}"
    victims+=("'${cur[slot]}'")
    killed=$((killed + 1))
    # Read after the kill, before any lease can end: what the dead worker held.
    held=$(held_by "${cur[slot]}")
    held_at_death=$((held_at_death + held))
    [ "$held" -gt 0 ] && kills_holding=$((kills_holding + 1))
    cur[slot]="o${org[slot]}-w$slot.$k"
    start_worker "${cur[slot]}" "${org[slot]}" "$port" --concurrency 4 --review-ms 300 --review-dist lognormal --fail-rate 0.05
  done
  wait_for "$drain_s" is_drained || true
  local list reclaimed
  list=$(IFS=,; echo "${victims[*]:-''}")
  reclaimed=$(q "SELECT count(*) FROM job_events WHERE kind = 'reclaimed' AND worker IN ($list)")
  if [ "$killed" = "$kills" ] && [ "$kills_holding" = "$kills" ] && [ "$reclaimed" -ge "$kills" ]; then
    pass "worker_kills: $killed workers SIGKILLed, each holding jobs ($held_at_death in all); $reclaimed of their leases reclaimed and redone"
  else
    fail "worker_kills: faults injected" "$killed of $kills kills, $kills_holding of them while holding a job, $reclaimed leases of the killed workers reclaimed"
  fi
  scenario_end
}

# ---- SIGSTOP past the lease, then SIGCONT --------------------------------------------------
scenario_worker_stalls() {
  local jobs=$((100 * scale)) stallers=$((2 * scale))
  scenario_begin worker_stalls "SIGSTOP $stallers workers holding jobs past their lease, drain with others, SIGCONT: late completions must be rejected"
  enqueue 1 "$jobs" 50
  local port i id
  port=$(free_port)
  start_coordinator coordinator "$port" || { scenario_end; return; }
  for i in $(seq "$stallers"); do
    start_worker "o1-stall-$i" 1 "$port" --concurrency 2 --review-ms 1000 --review-dist fixed
  done
  # Stop each staller at a moment it holds a job; a job completed just before the stop does
  # not count, so look again once it is stopped.
  local stopped_holding=0 try first_stop_ms=""
  for i in $(seq "$stallers"); do
    id="o1-stall-$i"
    for try in 1 2 3; do
      wait_for 30 at_least 1 held_by "$id" || break
      signal_one "$id" STOP
      first_stop_ms=${first_stop_ms:-$(date +%s%3N)}
      [ "$(held_by "$id")" -gt 0 ] && { stopped_holding=$((stopped_holding + 1)); break; }
      signal_one "$id" CONT
    done
  done
  local held
  held=$(q "SELECT count(*) FROM jobs WHERE state = 'assigned' AND assignee LIKE 'o1-stall-%'")
  for i in 1 2 3; do
    start_worker "o1-steady-$i" 1 "$port" --concurrency 4 --review-ms 100 --review-dist lognormal
  done
  wait_for 60 at_least "$held" events_of reclaimed 'o1-stall-%' || true
  wait_for "$drain_s" is_drained || true
  local stopped_for=$(($(date +%s%3N) - ${first_stop_ms:-$(date +%s%3N)}))
  for i in $(seq "$stallers"); do signal_one "o1-stall-$i" CONT; done
  # Their reviews finished long ago: each stalled worker now submits, and must be refused.
  wait_for 30 at_least "$stopped_holding" events_of rejected 'o1-stall-%' || true
  local rejected odd accepted_late
  rejected=$(events_of rejected 'o1-stall-%')
  odd=$(q "SELECT count(*) FROM job_events WHERE kind = 'rejected' AND worker LIKE 'o1-stall-%'
             AND split_part(detail, ':', 1) NOT IN ('stale_generation', 'lease_expired')")
  accepted_late=$(q "SELECT count(*) FROM job_events c JOIN job_events r ON r.job_id = c.job_id
                      AND r.generation = c.generation AND r.kind = 'reclaimed' AND r.id < c.id
                      WHERE c.kind = 'completed'")
  if [ "$stopped_holding" = "$stallers" ] && [ "$rejected" -ge "$stallers" ] && [ "$odd" = 0 ] &&
    [ "$accepted_late" = 0 ]; then
    pass "worker_stalls: $stallers workers stopped for up to $stopped_for ms (lease $lease_ms ms) holding $held jobs; $rejected late completions rejected as stale, none accepted"
  else
    fail "worker_stalls: late completions rejected" "$stopped_holding of $stallers stopped while holding, $rejected rejected ($odd for another reason), $accepted_late accepted after their lease was reclaimed"
  fi
  scenario_end
}

# ---- SIGKILL of the coordinator, restarted on the same endpoint ----------------------------
# all_sessions_in LOG WORKER...: every worker opened a session in that coordinator log.
all_sessions_in() {
  local log=$1 w
  shift
  for w in "$@"; do grep -q "session org=1 worker=$w opened" "$log" 2>/dev/null || return 1; done
}
scenario_coordinator_kills() {
  local jobs=$((400 * scale)) kills=$((3 * scale))
  scenario_begin coordinator_kills "SIGKILL the coordinator $kills times while $jobs jobs drain, restarting it on the same endpoint"
  enqueue 1 "$jobs" 50
  local port i
  port=$(free_port)
  start_coordinator coordinator "$port" || { scenario_end; return; }
  start_workers "$port" 4 --concurrency 4 --review-ms 150 --review-dist lognormal
  local k step=20 killed=0 restarted=0 rejoined=0 target
  for k in $(seq "$kills"); do
    target=$(next_step "$step")
    wait_for "$drain_s" progressed "$target" || break
    is_drained && break
    kill_one coordinator
    killed=$((killed + 1))
    start_coordinator coordinator "$port" || break
    restarted=$((restarted + 1))
    # Reconnected means a session on the new process: each start logs to a file of its own,
    # numbered by the drill's starts of that name (earlier scenarios' included).
    wait_for 30 all_sessions_in "$sdir/coordinator.${starts_of[coordinator]}.log" o1-w1 o1-w2 o1-w3 o1-w4 &&
      rejoined=$((rejoined + 1))
  done
  wait_for "$drain_s" is_drained || true
  local reconnects
  reconnects=$(cat "$sdir"/o1-w*.log | grep -c "reconnecting to" || true)
  if [ "$killed" = "$kills" ] && [ "$restarted" = "$kills" ] && [ "$rejoined" = "$kills" ]; then
    pass "coordinator_kills: coordinator SIGKILLed and restarted $killed times; all 4 workers opened a session on each new process ($reconnects reconnect attempts)"
  else
    fail "coordinator_kills: faults injected, workers reconnected" "$killed of $kills kills, $restarted restarts, $rejoined with all 4 workers back in a session"
  fi
  scenario_end
}

# ---- immediate restart of PostgreSQL mid-run --------------------------------------------------
scenario_pg_restart() {
  # Enough work that the queue is still draining at the last restart: a faster drain once left
  # the second restart with nothing to interrupt.
  local jobs=$((3000 * scale)) restarts=$((2 * scale))
  scenario_begin pg_restart "pg_ctl restart -m immediate $restarts times while $jobs jobs drain with many completions in flight"
  enqueue 1 "$jobs" 50
  local port i
  port=$(free_port)
  start_coordinator coordinator "$port" || { scenario_end; return; }
  start_workers "$port" 6 --concurrency 8 --review-ms 100 --review-dist lognormal
  # A restart that falls between two commits interrupts none. The planned restarts come first;
  # then, while no commit was interrupted yet, up to three more, so that the resolution the
  # scenario is cited for is exercised (and asserted below) rather than left to timing.
  local r=0 step=100 done_restarts=0 reconnected=0 target before
  while [ "$r" -lt $((restarts + 3)) ]; do
    if [ "$r" -ge "$restarts" ] &&
      [ "$(log_count coordinator "commit interrupted by a lost connection")" -ge 1 ]; then
      break
    fi
    r=$((r + 1))
    target=$(next_step "$step")
    wait_for "$drain_s" progressed "$target" || break
    is_drained && break
    before=$(log_count coordinator "database connection restored")
    timeout -k 5 120 "$root/compose/pgtmp" restart "$pgdir" >"$sdir/pg-restart.$r.log" 2>&1 ||
      { fail "pg_restart: restart PostgreSQL" "$(tail -3 "$sdir/pg-restart.$r.log")"; break; }
    done_restarts=$((done_restarts + 1))
    wait_for 60 at_least $((before + 1)) log_count coordinator "database connection restored" &&
      reconnected=$((reconnected + 1))
  done
  wait_for "$drain_s" is_drained || true
  local applied not_applied unknown
  applied=$(log_count coordinator "resolved from the row as applied")
  not_applied=$(log_count coordinator "resolved from the row as not applied")
  unknown=$(log_count coordinator "resolved from the row as unknown")
  if [ "$done_restarts" -ge "$restarts" ] && [ "$reconnected" = "$done_restarts" ]; then
    pass "pg_restart: $done_restarts immediate restarts, the coordinator reconnected after each"
  else
    fail "pg_restart: the coordinator reconnects" "$done_restarts of at least $restarts restarts, reconnected after $reconnected"
  fi
  # docs/guarantees.md cites this run for commits interrupted by the restart and resolved from
  # the row (what the worker heard is checked against job_events by scenario_end), and for leases
  # that ran out during the outage: reclaimed, and any late completion rejected as stale.
  local resolved=$((applied + not_applied + unknown))
  if [ "$resolved" -ge 1 ]; then
    pass "pg_restart: $resolved commits interrupted and resolved from the row: $applied applied (worker told ACCEPTED, replayed), $not_applied not applied (worker re-sends), $unknown unknown"
  else
    fail "pg_restart: interrupted commits resolved from the row" "no commit was resolved from the row in $done_restarts restarts (nothing in flight, or no resolution logged)"
  fi
  local reclaims rejected odd unexplained
  reclaims=$(q "SELECT count(*) FROM job_events WHERE kind = 'reclaimed'")
  rejected=$(q "SELECT count(*) FROM job_events WHERE kind = 'rejected'")
  odd=$(q "SELECT count(*) FROM job_events WHERE kind = 'rejected'
             AND split_part(detail, ':', 1) NOT IN ('stale_generation', 'lease_expired')")
  # A rejection is explained by the outage only if that lease was reclaimed.
  unexplained=$(q "SELECT count(*) FROM job_events r WHERE r.kind = 'rejected' AND NOT EXISTS
                     (SELECT 1 FROM job_events c WHERE c.job_id = r.job_id
                         AND c.generation = r.generation AND c.kind = 'reclaimed')")
  # Only an outage longer than the lease costs leases, and a quick restart on a quiet machine
  # is shorter; a holder told REVOKED before its review ends sends no late completion. So the
  # counts are reported, and what must hold is that every rejection is stale and of a lease the
  # reaper took back.
  if [ "$odd" = 0 ] && [ "$unexplained" = 0 ]; then
    pass "pg_restart: $reclaims leases that ran out during the outages reclaimed; $rejected late completions rejected as stale, each of a reclaimed lease"
  else
    fail "pg_restart: late completions rejected only as stale, of reclaimed leases" "$reclaims reclaims, $rejected rejected ($odd for another reason than stale_generation or lease_expired, $unexplained of a lease never reclaimed)"
  fi
  scenario_end
}

# ---- a cut between workers and the coordinator, longer than the lease -------------------------
relay_ctl() { "$py" "$lib/relay.py" ctl --port "$relay_control" "$@"; }
all_terminal() { [ "$(q "SELECT count(*) FROM jobs WHERE id = ANY('{$1}'::bigint[]) AND state NOT IN ('completed', 'failed', 'discarded', 'cancelled')")" = 0 ]; }
sessions_of() { log_count coordinator "session org=1 worker=$1 opened"; }

scenario_network_cut() {
  local jobs=$((300 * scale)) cuts=$((2 * scale))
  scenario_begin network_cut "cut the TCP path of 3 workers $cuts times for longer than the lease (the relay blackholes, then refuses, new connections), heal; others keep draining"
  enqueue 1 "$jobs" 50
  local port i
  port=$(free_port)
  start_coordinator coordinator "$port" || { scenario_end; return; }
  "$py" "$lib/relay.py" serve --target "$port" --ports-file "$sdir/relay.ports" --max-seconds 900 \
    >"$sdir/relay.log" 2>&1 &
  remember relay $!
  wait_for 10 test -s "$sdir/relay.ports" || { fail "network_cut: start relay" "$(cat "$sdir/relay.log")"; scenario_end; return; }
  local relay_port
  read -r relay_port relay_control <"$sdir/relay.ports"
  for i in 1 2 3; do
    start_worker "o1-far-$i" 1 "$relay_port" --concurrency 2 --review-ms 800 --review-dist fixed
  done
  local c n how cut_jobs held=0 ok=0 reconnected
  for c in $(seq "$cuts"); do
    wait_for 30 at_least 2 q "SELECT count(*) FROM jobs WHERE state = 'assigned' AND assignee LIKE 'o1-far-%'" || true
    how=blackhole
    [ $((c % 2)) = 1 ] || how=refuse
    relay_ctl cut "$how" >>"$sdir/relay-ctl.log" || fail "network_cut: cut" "the relay did not answer"
    cut_jobs=$(q "SELECT coalesce(string_agg(id::text, ','), '') FROM jobs WHERE state = 'assigned' AND assignee LIKE 'o1-far-%'")
    n=$(tr ',' '\n' <<<"$cut_jobs" | grep -c . || true)
    held=$((held + n))
    if [ "$c" = 1 ]; then
      for i in 1 2; do
        start_worker "o1-near-$i" 1 "$port" --concurrency 2 --review-ms 150 --review-dist lognormal
      done
    fi
    # The cut lasts until every job the far side held was reclaimed and finished by the near
    # side: necessarily longer than the lease.
    local cut_at=$SECONDS
    wait_for 60 all_terminal "$cut_jobs" || true
    relay_ctl heal >>"$sdir/relay-ctl.log" || fail "network_cut: heal" "the relay did not answer"
    echo "cut $c ($how): the far workers held $n jobs; the cut lasted $((SECONDS - cut_at)) s" >>"$sdir/relay-ctl.log"
    reconnected=0
    for i in 1 2 3; do
      wait_for 30 at_least $((c + 1)) sessions_of "o1-far-$i" && reconnected=$((reconnected + 1))
    done
    [ "$reconnected" = 3 ] && ok=$((ok + 1))
  done
  wait_for 30 at_least 1 events_of rejected 'o1-far-%' || true
  wait_for "$drain_s" is_drained || true
  local rejected odd
  rejected=$(events_of rejected 'o1-far-%')
  odd=$(q "SELECT count(*) FROM job_events WHERE kind = 'rejected' AND worker LIKE 'o1-far-%'
             AND split_part(detail, ':', 1) NOT IN ('stale_generation', 'lease_expired')")
  if [ "$ok" = "$cuts" ] && [ "$rejected" -ge 1 ] && [ "$odd" = 0 ]; then
    pass "network_cut: $cuts cuts longer than the lease while the far workers held $held jobs; all 3 reopened their sessions after each heal; $rejected stale completions rejected"
  else
    fail "network_cut: reconnect and reject" "$ok of $cuts heals with all 3 far workers back, $rejected rejected ($odd for another reason)"
  fi
  scenario_end
}

# ---- two coordinators whose clocks disagree --------------------------------------------------
# within: the disagreement (600 ms) is below lease - heartbeat (1500 ms); workers on both sides
# are killed so that either coordinator's reaper may take the other's leases.
# beyond: the disagreement (2500 ms) exceeds the lease, so the fast coordinator's reaper takes
# every lease the slow one grants at once: live workers lose jobs (availability), and fencing
# must still keep every acceptance single and current.
scenario_clock_skew() {
  local variant=$1 skew_a skew_b jobs
  if [ "$variant" = within ]; then
    skew_a=300 skew_b=-300 jobs=$((160 * scale))
  else
    skew_a=2500 skew_b=0 jobs=$((80 * scale))
  fi
  local d=$((skew_a - skew_b))
  scenario_begin "clock_skew_$variant" "two coordinators on one database, clocks ${skew_a} ms and ${skew_b} ms off (disagreement $d ms, lease $lease_ms ms), workers split between them"
  enqueue 1 "$jobs" 1000
  local port_a port_b i
  port_a=$(free_port)
  port_b=$(free_port)
  start_coordinator coordinator-a "$port_a" --clock-skew-ms "$skew_a" || { scenario_end; return; }
  start_coordinator coordinator-b "$port_b" --clock-skew-ms "$skew_b" || { scenario_end; return; }
  for i in 1 2; do
    start_worker "o1-a$i" 1 "$port_a" --concurrency 3 --review-ms 300 --review-dist fixed
    start_worker "o1-b$i" 1 "$port_b" --concurrency 3 --review-ms 300 --review-dist fixed
  done
  local killed="" held_at_death=0 kills_holding=0
  if [ "$variant" = within ]; then
    local side victim try held
    for side in a b; do
      # A kill of a worker that holds nothing proves nothing about its leases: freeze it while it
      # holds a job (a job finished just before the freeze does not count, so look again once it
      # is frozen), and only then kill it.
      victim="o1-${side}1"
      held=0
      for try in 1 2 3 4 5; do
        wait_for 30 at_least 1 held_by "$victim" || break
        signal_one "$victim" STOP
        held=$(held_by "$victim")
        [ "$held" -gt 0 ] && break
        signal_one "$victim" CONT
      done
      kill_one "$victim"
      killed="$killed,'$victim'"
      held_at_death=$((held_at_death + held))
      [ "$held" -gt 0 ] && kills_holding=$((kills_holding + 1))
      local side_port=$port_a
      [ "$side" = b ] && side_port=$port_b
      start_worker "o1-${side}3" 1 "$side_port" --concurrency 3 --review-ms 300 --review-dist fixed
    done
  fi
  wait_for "$drain_s" is_drained || true
  local live_reclaims by_a by_b
  live_reclaims=$(q "SELECT count(*) FROM job_events WHERE kind = 'reclaimed' AND worker NOT IN (''${killed})")
  by_a=$(q "SELECT count(*) FROM job_events WHERE kind = 'completed' AND worker LIKE 'o1-a%'")
  by_b=$(q "SELECT count(*) FROM job_events WHERE kind = 'completed' AND worker LIKE 'o1-b%'")
  if [ "$variant" = within ]; then
    # docs/guarantees.md cites this run for "0 live leases reclaimed" below the margin, and for
    # either coordinator's reaper taking the leases of a killed worker: both are asserted.
    local dead_reclaims
    dead_reclaims=$(q "SELECT count(*) FROM job_events WHERE kind = 'reclaimed' AND worker IN (''${killed})")
    if [ "$kills_holding" = 2 ] && [ "$dead_reclaims" -ge 1 ] && [ "$live_reclaims" = 0 ]; then
      pass "clock_skew_within: disagreement $d ms < lease - heartbeat ($((lease_ms - heartbeat_ms)) ms): 2 workers killed holding $held_at_death jobs, $dead_reclaims of their leases reclaimed; accepted $by_a via a, $by_b via b; 0 leases of live workers reclaimed"
    else
      fail "clock_skew_within: only the killed workers' leases reclaimed" "$kills_holding of 2 kills hit a worker holding a job ($held_at_death jobs), $dead_reclaims of their leases reclaimed, $live_reclaims leases of live workers reclaimed (expected 0)"
    fi
  elif [ "$live_reclaims" -ge 1 ]; then
    pass "clock_skew_beyond: disagreement $d ms >= lease: $live_reclaims leases of live workers reclaimed early by the fast coordinator (the availability cost); accepted $by_a via a, $by_b via b"
  else
    fail "clock_skew_beyond: early reclaims" "no lease of a live worker was reclaimed although the disagreement ($d ms) exceeds the lease"
  fi
  scenario_end
}

# ---- a rolling restart of two coordinators under load ------------------------------------------
# Each coordinator in turn is stopped as a deploy stops it (SIGTERM: it drains, answers what it
# holds, exits 0) and started again on its endpoint while the other serves; every worker lists
# both endpoints and fails over. Work must go on through both restarts, nothing lost or doubled.
# drain_one NAME: SIGTERM and wait (bounded) for the exit; the exit code lands in drain_rc
# ("killed" when it did not end within 30 s). Not in a subshell: only this shell can reap it.
drain_one() {
  local name=$1 pid=${pid_of[$1]} i
  drain_rc=0
  kill -TERM "$pid"
  for i in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid"
    drain_rc=killed
  fi
  if [ "$drain_rc" = 0 ]; then wait "$pid" || drain_rc=$?; else wait "$pid" 2>/dev/null || true; fi
  unset "pid_of[$name]"
}

scenario_rolling_restart() {
  local jobs=$((2400 * scale))
  scenario_begin rolling_restart "two coordinators on one database restarted one after the other (SIGTERM, drain, start again) while $jobs jobs drain through workers that list both"
  enqueue 1 "$jobs" 50
  local port_a port_b i
  port_a=$(free_port)
  port_b=$(free_port)
  start_coordinator coordinator-a "$port_a" || { scenario_end; return; }
  start_coordinator coordinator-b "$port_b" || { scenario_end; return; }
  for i in 1 2 3; do
    start_worker "o1-a$i" 1 "$port_a,tcp://127.0.0.1:$port_b" --concurrency 4 --review-ms 100 --review-dist lognormal
    start_worker "o1-b$i" 1 "$port_b,tcp://127.0.0.1:$port_a" --concurrency 4 --review-ms 100 --review-dist lognormal
  done
  local side port rc target ok=0 codes=""
  for side in a b; do
    port=$port_a
    [ "$side" = b ] && port=$port_b
    target=$(next_step 300)
    wait_for "$drain_s" progressed "$target" || break
    is_drained && break
    drain_one "coordinator-$side"
    rc=$drain_rc
    codes="$codes coordinator-$side:$rc"
    # While it is away the other one serves every worker: progress before it comes back.
    target=$(next_step 100)
    wait_for 60 progressed "$target" && [ "$rc" = 0 ] && ok=$((ok + 1))
    start_coordinator "coordinator-$side" "$port" || break
  done
  wait_for "$drain_s" is_drained || true
  # Each coordinator held three of the workers when it was drained (the b side held all six if
  # the a side's stayed): every worker lost its session at least once and must have opened another
  # ("(reconnected)" in its log), not just one of them.
  local failovers=0 moved=0 w n stuck=""
  for w in o1-a1 o1-a2 o1-a3 o1-b1 o1-b2 o1-b3; do
    n=$(grep -c "session at .*(reconnected)" "$sdir/$w.log" 2>/dev/null || true)
    failovers=$((failovers + n))
    if [ "$n" -ge 1 ]; then moved=$((moved + 1)); else stuck="$stuck $w"; fi
  done
  if [ "$ok" = 2 ] && [ "$moved" = 6 ]; then
    pass "rolling_restart: both coordinators drained and exited 0 in turn ($codes), work went on through the other each time, all 6 workers opened a new session ($failovers sessions moved)"
  else
    fail "rolling_restart: restarts under load" "$ok of 2 restarts drained with exit 0 and progress meanwhile ($codes), $moved of 6 workers opened a new session (none:${stuck:- -})"
  fi
  scenario_end
}
