# shellcheck shell=bash disable=SC2154
# The HA half of drills/containers, sourced by it: compose/docker-compose.ha.yml up member by
# member, jobs served, the leader's container stopped, a new leader, the coordinators serving on.
# Uses the drill's helpers (pc, names, healthy, exited_ok, wait_until, begin/end, say, die,
# purge_project, free_port) and its ha_project, ha_files, projects_up, jobs and work.

run_ha() {
  local p=$ha_project
  purge_project "$p"; projects_up+=("$p")
  hpc() { pc "$p" "${ha_files[@]}" "$@" >>"$work/compose-$p.log" 2>&1; }
  local m
  export ACLAIM_HTTP_PORT2; ACLAIM_HTTP_PORT2=$(free_port)

  begin "HA up: etcd1-3, healthy"
  hpc up -d --no-build etcd1 etcd2 etcd3
  for m in etcd1 etcd2 etcd3; do wait_until 90 "$m healthy" healthy "$(names "$p" "$m")"; done
  end

  begin "HA up: pg1-3 (Patroni), healthy, one leader with a synchronous standby"
  hpc up -d --no-build pg1 pg2 pg3
  for m in pg1 pg2 pg3; do wait_until 180 "$m healthy" healthy "$(names "$p" "$m")"; done
  wait_until 120 "a leader and a synchronous standby" ha_cluster_ready
  ha_list
  end

  begin "HA up: migrate, coordinator1-2 healthy"
  hpc up -d --no-build migrate
  wait_until 180 "HA migrate done" exited_ok "$(names "$p" migrate)" retried
  hpc up -d --no-build coordinator1 coordinator2
  for m in coordinator1 coordinator2; do wait_until 90 "$m healthy" healthy "$(names "$p" "$m")"; done
  end

  local coord1; coord1=$(names "$p" coordinator1)
  # More jobs than in the demo: the failover must come while they flow.
  local ha_jobs=$(( jobs * 2 ))
  begin "HA: enqueue $ha_jobs jobs, workers up"
  podman exec "$coord1" aclaimctl enqueue --org 1 --count "$ha_jobs" --payload ha-review >/dev/null
  hpc up -d --no-build worker worker2
  wait_until 60 "first completions" ha_completed_at_least 1
  end

  begin "HA: stop the leader's container, a new leader elected"
  local leader; leader=$(ha_leader)
  local before; before=$(ha_completed)
  say "    leader $leader; $before jobs completed so far"
  podman stop -t 10 "$(names "$p" "$leader")" >/dev/null 2>&1
  wait_until 120 "a new leader" ha_new_leader "$leader"
  say "    new leader $(ha_leader)"
  end

  begin "HA: the coordinators keep serving (every job completes)"
  for m in coordinator1 coordinator2; do wait_until 60 "$m healthy after the failover" healthy "$(names "$p" "$m")"; done
  wait_until 300 "every job completed after the failover" ha_completed_at_least "$ha_jobs"
  local after; after=$(ha_completed)
  say "    $after of $ha_jobs completed, $(( after - before )) of them after the leader stopped"
  [ "$before" -lt "$ha_jobs" ] || die "HA: the jobs were done before the failover; it proved nothing"
  local check_json
  check_json=$(podman exec "$coord1" aclaimctl check --json || true)
  python3 -c "import json,sys; d=json.loads(sys.argv[1]); v=d['violations']; print('    checker violations:', len(v)); sys.exit(1 if v else 0)" "$check_json" \
    || die "HA: the checker found violations: $check_json"
  end

  begin "HA: down -v"
  pc "$p" "${ha_files[@]}" down -v -t 10 >>"$work/compose-$p.log" 2>&1
  [ -z "$(podman ps -a -q --filter "label=io.podman.compose.project=$p")" ] || die "containers left after down"
  [ -z "$(podman volume ls -q --filter "label=io.podman.compose.project=$p")" ] || die "volumes left after down -v"
  podman network rm -f "${p}_default" >/dev/null 2>&1 || true
  end
}
# Patroni's view, from any running member.
ha_member() { local m; for m in pg1 pg2 pg3; do
  [ "$(podman inspect -f '{{.State.Running}}' "$(names "$ha_project" $m)" 2>/dev/null)" = true ] && { names "$ha_project" $m; return; }
done; return 1; }
ha_list() { podman exec "$(ha_member)" patronictl -c /etc/patroni/aclaim.yml list 2>/dev/null | sed 's/^/    /'; }
ha_json() { podman exec "$(ha_member)" patronictl -c /etc/patroni/aclaim.yml list -f json 2>/dev/null; }
ha_leader() { ha_json | python3 -c "import json,sys; print(next(m['Member'] for m in json.load(sys.stdin) if m['Role']=='Leader' and m['State']=='running'))"; }
ha_cluster_ready() { ha_json | python3 -c "import json,sys; r=[m['Role'] for m in json.load(sys.stdin) if m['State'] in ('running','streaming')]; sys.exit(0 if 'Leader' in r and 'Sync Standby' in r else 1)"; }
ha_new_leader() { local l; l=$(ha_leader) && [ -n "$l" ] && [ "$l" != "$1" ]; }
# Completed jobs, read on the primary wherever it is: the coordinators' multi-host DSN, from psql
# in a running member.
ha_completed() { podman exec "$(ha_member)" psql -qAtX -c "SELECT count(*) FROM jobs WHERE state='completed'" \
  "host=pg1,pg2,pg3 user=aclaim password=${ACLAIM_DB_PASSWORD:-aclaim} dbname=aclaim target_session_attrs=read-write connect_timeout=3"; }
ha_completed_at_least() { local n; n=$(ha_completed) && [ "$n" -ge "$1" ]; }

