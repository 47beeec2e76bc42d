"""Protocol 1.5 in the worker against a scripted ROUTER: HELLO asks for ``progress``; a report
is sent as PROGRESS and its answer (ACCEPTED, REJECTED or an ERROR) comes back as one
ProgressSaved, never re-sent; ASSIGNED's ``resume`` reaches the job it names; values out of range
are refused before they leave; a worker that turned the feature off does not ask for it. Every
wait has a deadline."""

from __future__ import annotations

import unittest
from typing import Any

import checkout

checkout.use()
from test_unit_link import Harness  # noqa: E402

from aclaim import Job  # noqa: E402
from aclaim._events import JobAssigned, ProgressSaved, SessionReady  # noqa: E402

PROGRESS = "progress"


class ProgressLink(unittest.TestCase):
    def harness(self, **options: Any) -> Harness:
        h = Harness(1, **options)
        self.addCleanup(h.close)
        return h

    def open(self, h: Harness) -> None:
        h.link.start()
        hello = h.expect("HELLO")
        self.assertIn(PROGRESS, hello.body["features"])
        h.fake.reply(hello, "WELCOME", org_id=7, lease_ms=3000, heartbeat_ms=1000,
                     max_body_bytes=65536, features=[PROGRESS])
        h.next_event(SessionReady)

    def test_a_report_is_sent_and_its_answers_come_back_once(self) -> None:
        h = self.harness()
        self.open(h)
        h.held_job(11)
        h.link.progress((11, 1), 60, "checked the wiring", "step=6")
        sent = h.expect("PROGRESS")
        self.assertEqual(sent.body, {"req": sent.req, "job_id": 11, "generation": 1,
                                     "percent": 60, "note": "checked the wiring",
                                     "checkpoint": "step=6"})
        h.fake.reply(sent, "ACCEPTED", job_id=11, generation=1, state="assigned", replayed=False)
        saved = h.next_event(ProgressSaved)
        self.assertEqual((saved.job, saved.percent, saved.accepted), ((11, 1), 60, True))
        # The job is still held: a report is not a verdict.
        self.assertTrue(h.link.held.holds((11, 1)))
        h.link.progress((11, 1), 70, "", "")
        stale = h.expect("PROGRESS")
        h.fake.reply(stale, "REJECTED", job_id=11, generation=1, reason="stale_generation",
                     detail="current generation is 2")
        refused = h.next_event(ProgressSaved)
        self.assertEqual((refused.accepted, refused.reason), (False, "stale_generation"))
        h.link.progress((11, 1), 80, "", "")
        errored = h.expect("PROGRESS")
        h.fake.reply(errored, "ERROR", code="database_unavailable", text="try later")
        self.assertEqual(h.next_event(ProgressSaved).reason, "error:database_unavailable")
        # Not re-sent: the next report supersedes it.
        self.assertEqual(h.link.pending(), 0)

    def test_assigned_resume_reaches_the_job_it_names(self) -> None:
        h = self.harness()
        self.open(h)
        h.link.claim(2, 0)
        claim = h.expect("CLAIM")
        job = {"lease_expires_at_us": 0, "lease_ms": 3000, "attempts": 2, "priority": 0,
               "payload": "doc"}
        h.fake.reply(claim, "ASSIGNED",
                     jobs=[dict(job, job_id=21, generation=2), dict(job, job_id=22, generation=1)],
                     resume=[{"job_id": 21, "generation": 1, "percent": 60, "note": "n",
                              "checkpoint": "step=6"}])
        first, second = h.next_event(JobAssigned).job, h.next_event(JobAssigned).job
        self.assertEqual(first["resume"]["checkpoint"], "step=6")
        self.assertNotIn("resume", second)

    def test_values_out_of_range_are_refused_before_they_leave(self) -> None:
        h = self.harness()
        self.open(h)
        for percent, note, checkpoint in [(101, "", ""), (-1, "", ""), (True, "", ""),
                                          (10, "n" * 201, ""), (10, "", "c" * 4097)]:
            with self.assertRaises(ValueError):
                h.link.progress((11, 1), percent, note, checkpoint)
        self.assertEqual(h.link.pending(), 0)

    def test_progress_false_does_not_ask_for_it(self) -> None:
        h = self.harness(progress=False)
        h.link.start()
        hello = h.expect("HELLO")
        self.assertNotIn(PROGRESS, hello.body["features"])


class ProgressJob(unittest.TestCase):
    def test_job_progress_checks_and_hands_the_report_on(self) -> None:
        sent = []
        job = Job(job_id=1, generation=2, attempts=1, priority=0, payload="p", lease_ms=1000,
                  _report=lambda *r: sent.append(r))
        job.progress(50, "half", "step=5")
        with self.assertRaises(ValueError):
            job.progress(150)
        self.assertEqual(sent, [(50, "half", "step=5")])
        self.assertIsNone(job.resume)


if __name__ == "__main__":
    unittest.main()
