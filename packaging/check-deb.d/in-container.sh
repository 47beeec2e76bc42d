#!/usr/bin/env bash
# The part of packaging/check-deb that runs inside a fresh Debian 12 container:
#   in-container.sh DEB DSN ZMQ_PORT HTTP_PORT CONSOLE_PORT
# Without systemd in the container, each service is started the way its unit starts it: as the
# user aclaim (setpriv, as User= does: no login session), its environment exactly the
# VARIABLE=value lines of its /etc/aclaim/*.env, then stopped by SIGTERM as KillSignal= does.
set -uo pipefail

deb=$1 dsn=$2 zmq_port=$3 http_port=$4 console_port=$5
# shellcheck source=packaging/check-deb.d/checks.sh
. "$(dirname "${BASH_SOURCE[0]}")/checks.sh"

# The settings a unit's EnvironmentFile= gives: its VARIABLE=value lines, nothing else.
unit_env() { grep -E '^[A-Z_][A-Z0-9_]*=' "$1"; }

# run_as_service NAME ENV_FILE READY_PORT READY_PATH COMMAND...: starts COMMAND as aclaim with the
# file's settings, waits until READY_PATH answers 200, checks the process's user, stops it with
# SIGTERM and checks that it exits 0.
run_as_service() {
  local name=$1 env_file=$2 port=$3 path=$4
  shift 4
  local log="/tmp/$name.log" settings
  mapfile -t settings < <(unit_env "$env_file")
  setpriv --reuid aclaim --regid aclaim --init-groups env -i "${settings[@]}" "$@" >"$log" 2>&1 &
  local pid=$! status="" i
  for i in $(seq 150); do
    status=$(http_status "$port" "$path" 2>/dev/null) || status=""
    [[ $status == *" 200 "* ]] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  if [[ $status == *" 200 "* ]]; then
    pass "$name answers $path on 127.0.0.1:$port ($status) after about $((i / 5)) s"
  else
    fail "$name did not answer $path on 127.0.0.1:$port"
    cat "$log"
  fi
  local uid
  uid=$(awk '/^Uid:/ {print $2}' "/proc/$pid/status" 2>/dev/null)
  if [ -n "$uid" ] && [ "$uid" = "$(id -u aclaim)" ]; then
    pass "$name runs as aclaim (uid $uid)"
  else
    fail "$name runs as uid '${uid:-gone}', not aclaim"
  fi
  kill -TERM "$pid" 2>/dev/null
  local code
  wait "$pid"
  code=$?
  if [ "$code" = 0 ]; then pass "$name exits 0 on SIGTERM"; else fail "$name exits $code on SIGTERM"; fi
  echo "   its log:"
  sed 's/^/   | /' "$log" | tail -n 8
}

step "apt install ./$(basename "$deb")"
export DEBIAN_FRONTEND=noninteractive
apt-get -qq update >/tmp/apt-update.log 2>&1 || { cat /tmp/apt-update.log; exit 1; }
cp "$deb" /tmp/
if apt-get install -y --no-install-recommends "/tmp/$(basename "$deb")" >/tmp/apt-install.log 2>&1; then
  grep -E '^(Setting up|Unpacking|Need to get|After this)' /tmp/apt-install.log | sed 's/^/   /'
  pass "apt installed $(dpkg-query -W -f '${Package} ${Version}' aclaim)"
else
  cat /tmp/apt-install.log
  fail "apt install"
  exit 1
fi
done_step install

step "binaries, user, files"
if out=$(aclaimctl --version); then pass "aclaimctl --version: $out"; else fail "aclaimctl --version"; fi
for bin in aclaim-coordinator aclaim-worker aclaim-console; do
  if "$bin" --help >/dev/null; then pass "$bin --help"; else fail "$bin --help"; fi
done
if entry=$(getent passwd aclaim); then pass "user: $entry"; else fail "no user aclaim"; fi
for f in /etc/aclaim/coordinator.env /etc/aclaim/console.env; do
  mode=$(stat -c '%a %U:%G' "$f")
  if [ "$mode" = "600 root:root" ]; then pass "$f: $mode"; else fail "$f: $mode, not 600 root:root"; fi
done
for f in /lib/systemd/system/aclaim-coordinator.service /lib/systemd/system/aclaim-console.service \
  /usr/share/aclaim/schema/baseline/tables.sql /usr/share/doc/aclaim/copyright; do
  if [ -f "$f" ]; then pass "$f"; else fail "missing $f"; fi
done
done_step "binaries, user, files"

step "aclaimctl migrate"
if out=$(aclaimctl --dsn "$dsn" migrate 2>&1); then
  pass "migrate: $(tail -n 1 <<<"$out")"
else
  echo "$out"
  fail "aclaimctl migrate"
fi
if out=$(aclaimctl --dsn "$dsn" status 2>&1); then pass "status answers"; else echo "$out"; fail "status"; fi
done_step migrate

step "the coordinator as its unit starts it"
# What an operator does after installing (README.Debian): the database, addresses, a CURVE key.
sed -i -e "s|^#ACLAIM_DSN=.*|ACLAIM_DSN=$dsn|" \
  -e "s|^ACLAIM_BIND=.*|ACLAIM_BIND=tcp://127.0.0.1:$zmq_port|" \
  -e "s|^ACLAIM_HTTP_BIND=.*|ACLAIM_HTTP_BIND=127.0.0.1:$http_port|" /etc/aclaim/coordinator.env
aclaimctl keys generate --server --out-dir /etc/aclaim >/dev/null 2>&1 || fail "keys generate"
chgrp aclaim /etc/aclaim/coordinator.key && chmod 0640 /etc/aclaim/coordinator.key
unit_env /etc/aclaim/coordinator.env | sed 's/^/   /'
run_as_service aclaim-coordinator /etc/aclaim/coordinator.env "$http_port" /healthz /usr/bin/aclaim-coordinator
done_step coordinator

step "the console as its unit starts it"
sed -i -e "s|^#ACLAIM_DSN=.*|ACLAIM_DSN=$dsn|" \
  -e "s|^ACLAIM_LISTEN=.*|ACLAIM_LISTEN=127.0.0.1:$console_port|" /etc/aclaim/console.env
run_as_service aclaim-console /etc/aclaim/console.env "$console_port" / /usr/bin/aclaim-console serve
done_step console

step "apt remove, then purge"
if apt-get remove -y aclaim >/tmp/apt-remove.log 2>&1 && [ ! -e /usr/bin/aclaim-coordinator ] &&
  [ -f /etc/aclaim/coordinator.env ]; then
  pass "removed; the edited settings stay"
else
  cat /tmp/apt-remove.log
  fail "apt remove"
fi
if apt-get purge -y aclaim >/tmp/apt-purge.log 2>&1 && [ ! -e /etc/aclaim/coordinator.env ]; then
  pass "purged; the settings are gone"
else
  cat /tmp/apt-purge.log
  fail "apt purge"
fi
done_step remove

if [ "$failures" -gt 0 ]; then
  echo "in the container: $failures failed"
  exit 1
fi
echo "in the container: all passed"
