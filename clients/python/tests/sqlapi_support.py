"""What the SQL API's tests share: DSNs of the suite's PostgreSQL for another database or login,
and statements run by the suite's own (administrative) login."""

from __future__ import annotations

import urllib.parse

import psycopg2


def with_database(dsn: str, name: str) -> str:
    """The DSN (URI form, as the suite's) naming another database."""
    parts = urllib.parse.urlsplit(dsn)
    return urllib.parse.urlunsplit(parts._replace(path="/" + name))


def with_user(dsn: str, user: str) -> str:
    """The DSN logging in as another role (the throwaway server trusts 127.0.0.1)."""
    parts = urllib.parse.urlsplit(dsn)
    host = parts.netloc.rsplit("@", 1)[-1]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}@{host}"))


def admin(dsn: str, *statements: str) -> None:
    """Runs each statement in autocommit (CREATE DATABASE, roles, grants)."""
    conn = psycopg2.connect(dsn, connect_timeout=10)
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            for s in statements:
                cur.execute(s)
    finally:
        conn.close()
