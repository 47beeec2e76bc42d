"""The jobs a worker holds and when each lease must be renewed.

Pure bookkeeping over monotonic times (seconds) handed in by the caller, so that it is tested
without sockets or sleeps. Mirrors the C++ client's HeldJobs (worker/held_jobs.hpp).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

JobRef = Tuple[int, int]
"""A job as the worker names it to the coordinator: (job_id, generation)."""


@dataclass
class _Entry:
    generation: int
    next_renewal: float
    renewal_sent: float
    lease_deadline: float
    in_flight: bool = False
    renewing: bool = True


class HeldJobs:
    """Held jobs, their renewal schedule and the worker's own estimate of each lease's end."""

    def __init__(self, heartbeat_s: float = 10.0) -> None:
        self._jobs: Dict[int, _Entry] = {}
        self.heartbeat_s = heartbeat_s

    def add(self, job: JobRef, lease_s: float, now: float) -> None:
        """A freshly assigned job: its first renewal is due one heartbeat from now."""
        job_id, generation = job
        self._jobs[job_id] = _Entry(generation, now + self.heartbeat_s, now, now + lease_s)

    def remove(self, job: JobRef) -> bool:
        """Stops tracking the job if it is held at that generation; False if it was not."""
        entry = self._jobs.get(job[0])
        if entry is None or entry.generation != job[1]:
            return False
        del self._jobs[job[0]]
        return True

    def holds(self, job: JobRef) -> bool:
        entry = self._jobs.get(job[0])
        return entry is not None and entry.generation == job[1]

    def __len__(self) -> int:
        return len(self._jobs)

    def all(self) -> List[JobRef]:
        return [(job_id, e.generation) for job_id, e in self._jobs.items()]

    def stop_renewing(self, job_id: int) -> None:
        """No more renewals: the job's outcome is on its way, or a stall is being rehearsed.
        The job stays held until its verdict."""
        entry = self._jobs.get(job_id)
        if entry is not None:
            entry.renewing = False

    def renewing(self, job_id: int) -> bool:
        entry = self._jobs.get(job_id)
        return entry is not None and entry.renewing

    def take_due(self, now: float, ahead: float = 0.0) -> List[JobRef]:
        """Jobs whose renewal is due and not already in flight; each is marked in flight and its
        next renewal scheduled one heartbeat after `now`. With `ahead`, once any renewal is due,
        also the jobs due within `ahead` seconds: for one RENEW that names them all (protocol
        1.3). Renewing early only extends a lease from now, and jobs taken together stay due
        together, so with half a heartbeat the held jobs share one heartbeat within one
        interval."""
        if not any(e.renewing and not e.in_flight and e.next_renewal <= now
                   for e in self._jobs.values()):
            return []
        due = []
        for job_id, e in self._jobs.items():
            if not e.renewing or e.in_flight or e.next_renewal > now + ahead:
                continue
            e.in_flight = True
            e.renewal_sent = now
            e.next_renewal = now + self.heartbeat_s
            due.append((job_id, e.generation))
        return due

    def renewed(self, job: JobRef, lease_s: float) -> None:
        """A LEASE arrived: the lease now runs `lease_s` from when the renewal was sent, which is
        never later than when the coordinator extended it."""
        entry = self._jobs.get(job[0])
        if entry is None or entry.generation != job[1]:
            return
        entry.in_flight = False
        entry.lease_deadline = entry.renewal_sent + lease_s

    def renewal_abandoned(self, job_id: int) -> None:
        """The renewal got no answer that counts: allow another one at its usual time."""
        entry = self._jobs.get(job_id)
        if entry is not None:
            entry.in_flight = False

    def resume_renewing(self, job_id: int, now: float) -> None:
        """Renewals again, the first one now, for a job whose stop_renewing() was premature: its
        PARK was refused with an ERROR, so the worker still holds it."""
        entry = self._jobs.get(job_id)
        if entry is not None:
            entry.renewing = True
            entry.in_flight = False
            entry.next_renewal = now

    def retry_renewal(self, job_id: int, at: float) -> None:
        """The renewal was refused for now (coordinator busy): try again at `at` at the latest."""
        entry = self._jobs.get(job_id)
        if entry is not None:
            entry.in_flight = False
            entry.next_renewal = min(entry.next_renewal, at)

    def renew_all_now(self, now: float) -> None:
        """After a reconnect every job is renewed at once: its lease kept running meanwhile."""
        for e in self._jobs.values():
            e.in_flight = False
            e.next_renewal = now

    def next_due(self) -> Optional[float]:
        """When the next renewal or lease end falls due, if any job is renewing."""
        times = [min(e.next_renewal, e.lease_deadline) if not e.in_flight else e.lease_deadline
                 for e in self._jobs.values() if e.renewing]
        return min(times) if times else None

    def lease_deadline(self, job_id: int) -> Optional[float]:
        """The worker's own conservative estimate of when the job's lease ends."""
        entry = self._jobs.get(job_id)
        return None if entry is None else entry.lease_deadline

    def take_expired(self, now: float) -> List[JobRef]:
        """Renewing jobs whose lease, by the worker's estimate, has run out without a renewal
        (the coordinator could not be reached in time): they are dropped, since the reaper will
        take them back."""
        gone = [(job_id, e.generation) for job_id, e in self._jobs.items()
                if e.renewing and e.lease_deadline <= now]
        for job_id, _ in gone:
            del self._jobs[job_id]
        return gone
