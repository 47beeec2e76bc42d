"""What a handler's return or exception means for its job: the outcome the worker sends."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, Optional, Tuple

from . import _wire
from .errors import Cancelled, FailJob, ReleaseJob
from .model import Job

log = logging.getLogger("aclaim.worker")


@dataclass(frozen=True)
class Outcome:
    """``kind`` is ``complete`` (``text`` the result_ref), ``fail`` (``text`` the reason),
    ``release``, or ``cancelled`` (the handler gave the job up after its cancellation)."""

    kind: str
    text: str = ""
    retryable: bool = False
    handler_error: bool = False  # the handler raised something other than our exceptions
    # kind "progress" (Job.progress, protocol 1.5): percent, note and checkpoint to send.
    progress: Optional[Tuple[int, str, str]] = None
    # kind "park" (Job.park, protocol 1.6): timeout_ms, note and where to put the answer.
    park: Optional[Tuple[int, str, Any]] = None


def run_handler(handler: Callable[[Job], Optional[str]], job: Job, worker_id: str) -> Outcome:
    """Runs the handler on the job and says what to send for it. Never raises."""
    try:
        result = handler(job)
    except Cancelled:
        return Outcome("cancelled")
    except FailJob as e:
        return Outcome("fail", e.reason, e.retryable)
    except ReleaseJob:
        return Outcome("release")
    except Exception as e:
        # A bug or a transient fault in the review: another attempt may well succeed.
        log.exception("worker=%s handler raised on job=%d", worker_id, job.job_id)
        return Outcome("fail", f"{type(e).__name__}: {e}", True, True)
    if result is None and job.cancelled:
        return Outcome("cancelled")
    try:
        return Outcome("complete", _wire.check_result_ref(result))  # type: ignore[arg-type]
    except (TypeError, ValueError) as e:
        log.error("worker=%s handler's result for job=%d is unusable: %s", worker_id,
                  job.job_id, e)
        return Outcome("fail", f"the handler returned no usable result_ref: {e}", True, True)
