#!/bin/sh
# The entrypoint of compose/Dockerfile.postgres, doing what the official postgres image's does for
# compose/docker-compose.yml: on an empty data folder, initdb with POSTGRES_USER as the superuser
# (password POSTGRES_PASSWORD) and create POSTGRES_DB; then run the server on every interface,
# password-checked (scram-sha-256) from other containers, trusted on its own Unix socket.
#   aclaim-postgres postgres [-c name=value]...
set -eu

# As root: the volume may have been created root-owned; hand it to postgres and start again as it.
if [ "$(id -u)" = 0 ]; then
  mkdir -p "$PGDATA" /var/run/postgresql
  chown postgres: "$PGDATA" /var/run/postgresql
  chmod 700 "$PGDATA"
  exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi

user=${POSTGRES_USER:-postgres}
db=${POSTGRES_DB:-$user}
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  : "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD must be set (the password of POSTGRES_USER)}"
  pwfile=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
  initdb -D "$PGDATA" --username="$user" --pwfile="$pwfile" --encoding=UTF8 \
    --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  rm -f "$pwfile"
  # Other containers reach it over the compose network, each with the password.
  printf 'host all all all scram-sha-256\n' >>"$PGDATA/pg_hba.conf"
  if [ "$db" != postgres ]; then
    # Single-user mode: nothing listens before the database exists.
    printf 'CREATE DATABASE "%s" OWNER "%s";\n' "$db" "$user" \
      | postgres --single -D "$PGDATA" postgres >/dev/null
  fi
  echo "aclaim-postgres: initialized $PGDATA (superuser $user, database $db)"
fi

if [ "${1:-postgres}" = postgres ]; then
  [ $# -eq 0 ] || shift
  exec postgres -D "$PGDATA" -c listen_addresses='*' "$@"
fi
exec "$@"
