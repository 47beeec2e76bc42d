#!/usr/bin/env bash
# The part of packaging/check-deb that runs inside a Debian 12 container booted with systemd:
#   under-systemd.sh DEB DSN ZMQ_PORT HTTP_PORT CONSOLE_PORT
# The units as systemd runs them: enabled by the install but skipped while unconfigured, started
# by a restart once their settings name a database, running as aclaim under their hardening,
# stopped cleanly, and stopped by the package's removal.
set -uo pipefail

deb=$1 dsn=$2 zmq_port=$3 http_port=$4 console_port=$5
units="aclaim-coordinator aclaim-console"
# shellcheck source=packaging/check-deb.d/checks.sh
. "$(dirname "${BASH_SOURCE[0]}")/checks.sh"
prop() { systemctl show -P "$2" "$1"; }

# check_running UNIT PORT PATH: the unit is active, answers PATH, and runs as aclaim.
check_running() {
  local unit=$1 port=$2 path=$3 status=""
  for _ in $(seq 150); do
    status=$(http_status "$port" "$path" 2>/dev/null) || status=""
    [[ $status == *" 200 "* ]] && break
    [ "$(systemctl is-active "$unit")" = failed ] && break
    sleep 0.2
  done
  if [[ $status == *" 200 "* ]]; then
    pass "$unit active, answers $path on 127.0.0.1:$port ($status)"
  else
    fail "$unit does not answer $path on 127.0.0.1:$port ($(systemctl is-active "$unit"))"
    journalctl -u "$unit" --no-pager | tail -n 20
  fi
  local pid uid
  pid=$(prop "$unit" MainPID)
  uid=$(awk '/^Uid:/ {print $2}' "/proc/$pid/status" 2>/dev/null)
  if [ -n "$uid" ] && [ "$uid" = "$(id -u aclaim)" ]; then
    pass "$unit runs as aclaim (pid $pid, uid $uid)"
  else
    fail "$unit's main process $pid runs as uid '${uid:-gone}', not aclaim"
  fi
}

# check_stopped UNIT: stopped by systemctl stop (SIGTERM), the process exited 0.
check_stopped() {
  local unit=$1
  systemctl stop "$unit"
  local code result
  code=$(prop "$unit" ExecMainStatus) result=$(prop "$unit" Result)
  if [ "$code" = 0 ] && [ "$result" = success ]; then
    pass "$unit stopped: exit $code, result $result"
  else
    fail "$unit stopped with exit $code, result $result"
    journalctl -u "$unit" --no-pager | tail -n 20
  fi
}

step "systemd is running"
for _ in $(seq 100); do
  state=$(systemctl is-system-running 2>/dev/null)
  case "$state" in running | degraded) break ;; esac
  sleep 0.2
done
pass "systemd $(systemctl --version | head -n 1 | cut -d' ' -f2): $state"
done_step systemd

step "apt install: enabled, skipped while unconfigured"
export DEBIAN_FRONTEND=noninteractive
apt-get -qq update >/tmp/apt-update.log 2>&1 || { cat /tmp/apt-update.log; exit 1; }
cp "$deb" /tmp/
if apt-get install -y --no-install-recommends "/tmp/$(basename "$deb")" >/tmp/apt-install.log 2>&1; then
  pass "installed $(dpkg-query -W -f '${Package} ${Version}' aclaim)"
else
  cat /tmp/apt-install.log
  fail "apt install"
  exit 1
fi
for unit in $units; do
  enabled=$(systemctl is-enabled "$unit") active=$(systemctl is-active "$unit")
  result=$(prop "$unit" Result)
  if [ "$enabled" = enabled ] && [ "$active" = inactive ] && [ "$result" = exec-condition ]; then
    pass "$unit: $enabled, $active (its ExecCondition: no ACLAIM_DSN)"
  else
    fail "$unit: $enabled, $active, result $result (want enabled, inactive, exec-condition)"
  fi
done
done_step install

step "configured: the coordinator and the console started by systemd"
aclaimctl --dsn "$dsn" migrate >/dev/null 2>&1 || fail "aclaimctl migrate"
sed -i -e "s|^#ACLAIM_DSN=.*|ACLAIM_DSN=$dsn|" \
  -e "s|^ACLAIM_BIND=.*|ACLAIM_BIND=tcp://127.0.0.1:$zmq_port|" \
  -e "s|^ACLAIM_HTTP_BIND=.*|ACLAIM_HTTP_BIND=127.0.0.1:$http_port|" /etc/aclaim/coordinator.env
aclaimctl keys generate --server --out-dir /etc/aclaim >/dev/null 2>&1 || fail "keys generate"
chgrp aclaim /etc/aclaim/coordinator.key && chmod 0640 /etc/aclaim/coordinator.key
sed -i -e "s|^#ACLAIM_DSN=.*|ACLAIM_DSN=$dsn|" \
  -e "s|^ACLAIM_LISTEN=.*|ACLAIM_LISTEN=127.0.0.1:$console_port|" /etc/aclaim/console.env
systemctl restart aclaim-coordinator aclaim-console
check_running aclaim-coordinator "$http_port" /healthz
check_running aclaim-console "$console_port" /
systemd-analyze security aclaim-coordinator aclaim-console 2>/dev/null | grep -F 'Overall exposure' |
  sed 's/^→ /   /'
for unit in $units; do check_stopped "$unit"; done
done_step "started by systemd"

step "a refused setting is not restarted"
# Exit 2: a setting the coordinator refuses at start, which restarting would only repeat.
echo "ACLAIM_LEASE_MS=1" >>/etc/aclaim/coordinator.env
systemctl start aclaim-coordinator
sleep 4
active=$(systemctl is-active aclaim-coordinator) restarts=$(prop aclaim-coordinator NRestarts)
code=$(prop aclaim-coordinator ExecMainStatus)
if [ "$active" = failed ] && [ "$restarts" = 0 ] && [ "$code" = 2 ]; then
  pass "ACLAIM_LEASE_MS=1: failed with exit $code, $restarts restarts"
else
  fail "ACLAIM_LEASE_MS=1: $active, exit $code, $restarts restarts (want failed, 2, 0)"
fi
journalctl -u aclaim-coordinator --no-pager | grep -F 'aclaim-coordinator: ' | tail -n 1 | sed 's/^/   /'
systemctl reset-failed aclaim-coordinator
sed -i '/^ACLAIM_LEASE_MS=1$/d' /etc/aclaim/coordinator.env
done_step "refused setting"

step "apt remove stops the services"
systemctl start aclaim-console
apt-get remove -y aclaim >/tmp/apt-remove.log 2>&1 || { cat /tmp/apt-remove.log; fail "apt remove"; }
active=$(systemctl is-active aclaim-console)
if [ "$active" != active ] && [ ! -e /usr/bin/aclaim-console ]; then
  pass "removed; aclaim-console $active"
else
  fail "after apt remove aclaim-console is $active"
fi
apt-get purge -y aclaim >/tmp/apt-purge.log 2>&1 || { cat /tmp/apt-purge.log; fail "apt purge"; }
done_step remove

if [ "$failures" -gt 0 ]; then
  echo "under systemd: $failures failed"
  exit 1
fi
echo "under systemd: all passed"
