"""The exceptions of the aclaim client: what a handler raises to say how a review ended, and
what the worker raises when it cannot go on."""

from __future__ import annotations

from typing import Optional


class WorkerError(Exception):
    """The worker cannot go on: the coordinator refused it for good (an unknown key, a worker
    name that is not the key's, a queue the key may not serve, a revoked key) or the worker was
    misconfigured. `code` is the protocol's ERROR code when the coordinator gave one."""

    def __init__(self, message: str, code: Optional[str] = None) -> None:
        super().__init__(message)
        self.code = code


class FailJob(Exception):
    """Raised by a handler: the review failed. With ``retryable=True`` (the default) the job goes
    back to its queue while attempts remain (after the queue's backoff); with
    ``retryable=False`` it is failed for good."""

    def __init__(self, reason: str, retryable: bool = True) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable


class ReleaseJob(Exception):
    """Raised by a handler: give the job back untouched (RELEASE); its attempt is refunded and
    another reviewer may take it at once."""


class ParkRefused(Exception):
    """Raised by ``job.park()``: the coordinator refused the PARK (``reason``: the reason a
    completion of that generation would get, e.g. ``lease_expired``, or ``error:<code>``). The job
    is not parked; the handler still holds it unless it was lost."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class Cancelled(Exception):
    """Raised by a handler (``job.cancellation.raise_if_cancelled()``) once its job was taken
    away: the worker sends no outcome for it (or releases it, if the coordinator may still
    think it is held)."""

    def __init__(self, reason: str = "cancelled") -> None:
        super().__init__(reason)
        self.reason = reason
