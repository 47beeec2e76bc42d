"""aclaim's Python client.

Reviewers (``Worker``) claim jobs from coordinators over the wire protocol of docs/protocol.md,
with CURVE keys, lease renewal, cancellation, failover and reconnection:

    import aclaim

    def review(job: aclaim.Job) -> str:
        job.cancellation.raise_if_cancelled()
        return f"review:{job.job_id}"

    aclaim.Worker("tcp://127.0.0.1:5555", "reviewer-1", org_id=1).run(review)

Producers and result consumers speak the SQL API instead (aclaim.producer, aclaim.consumer).
"""

from .errors import Cancelled, FailJob, ParkRefused, ReleaseJob, WorkerError
from .keys import CurveKeys
from .model import Cancellation, Job, ParkTicket, Verdict, Welcome, WorkerStats
from .worker import Handler, Worker

# ---- producers and result consumers (the SQL API): aclaim.producer, aclaim.consumer ----
from .consumer import GroupStatus, JobOutcome, ResultConsumer
from .producer import CancelledJob, Dependency, Enqueued, JobStatus, NewJob, Producer, in_call

from ._version import __version__

__all__ = [
    # Reviewers: the wire protocol.
    "Worker", "Handler", "Job", "Cancellation", "Verdict", "Welcome", "WorkerStats",
    "CurveKeys", "WorkerError", "FailJob", "ReleaseJob", "Cancelled", "ParkTicket", "ParkRefused",
    # Producers and result consumers: the SQL API.
    "Producer", "NewJob", "Enqueued", "CancelledJob", "Dependency", "JobStatus", "in_call",
    "ResultConsumer", "JobOutcome", "GroupStatus",
]
