"""Time as the SQL API takes it: microseconds since the Unix epoch, from the caller's clock."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Optional, Union

Instant = Union[datetime, float]
"""A point in time: an aware ``datetime``, or seconds since the epoch as ``time.time()`` gives."""


def instant_us(t: Optional[Instant]) -> Optional[int]:
    """Microseconds since the epoch, or None. A naive datetime is refused: its zone is a guess."""
    if t is None:
        return None
    if isinstance(t, datetime):
        if t.tzinfo is None:
            raise ValueError(f"{t!r} has no time zone; give an aware datetime")
        delta = t - datetime(1970, 1, 1, tzinfo=timezone.utc)
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    return int(round(float(t) * 1_000_000))


def duration_us(d: Optional[Union[timedelta, float]]) -> Optional[int]:
    """Microseconds of a ``timedelta`` or of seconds, or None."""
    if d is None:
        return None
    if isinstance(d, timedelta):
        return (d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds
    return int(round(float(d) * 1_000_000))


def from_us(us: Optional[int]) -> Optional[datetime]:
    """The aware UTC datetime of microseconds since the epoch, or None."""
    if us is None:
        return None
    return datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(microseconds=us)
