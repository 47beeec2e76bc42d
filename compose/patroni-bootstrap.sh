#!/bin/sh
# Patroni's post_bootstrap for compose/docker-compose.ha.yml: runs once, on the member that
# initialized the cluster, with the superuser's connection URL as $1. Creates the role the
# coordinators and aclaimctl log in as, and its database; the schema comes from `aclaimctl migrate`.
# CREATEROLE, not superuser: the migrations create the NOLOGIN roles aclaim_coordinator and
# aclaim_producer and grant them to the login that runs them (docs/security.md).
set -eu
psql "$1" -v ON_ERROR_STOP=1 -qAtX \
  -v pw="${ACLAIM_DB_PASSWORD:?ACLAIM_DB_PASSWORD is not set}" <<'SQL'
CREATE ROLE aclaim LOGIN CREATEROLE PASSWORD :'pw';
CREATE DATABASE aclaim OWNER aclaim;
SQL
