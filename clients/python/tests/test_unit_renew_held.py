"""Protocol 1.3 in the worker against a scripted ROUTER: HELLO asks for ``renew_held``; where
WELCOME grants it one RENEW per heartbeat names every held job (its ``held``), each job answered
on its own under its own req; without the grant, or after the coordinator refused a RENEW that
named several, one RENEW per job. Every wait has a deadline."""

from __future__ import annotations

import json
import re
import unittest
from typing import Any, List, Tuple

import checkout

checkout.use()
from fake_coordinator import Request  # noqa: E402
from test_unit_link import Harness  # noqa: E402
from test_unit_wire import PROTOCOL_MD  # noqa: E402

from aclaim import _wire  # noqa: E402
from aclaim._events import JobAssigned, JobLost, SessionReady  # noqa: E402
from aclaim._held import HeldJobs  # noqa: E402

RENEW_HELD = "renew_held"


def named(renew: Request) -> List[Tuple[int, int]]:
    """(req, job_id) of every job a RENEW names, its own first."""
    return [(renew.req, renew.body["job_id"])] + [(e["req"], e["job_id"])
                                                  for e in renew.body.get("held", [])]


class RenewHeldLink(unittest.TestCase):
    def harness(self, **options: Any) -> Harness:
        h = Harness(1, **options)
        self.addCleanup(h.close)
        return h

    def session(self, h: Harness, features: List[str]) -> None:
        hello = h.expect("HELLO")
        self.assertIn(RENEW_HELD, hello.body["features"])
        h.fake.reply(hello, "WELCOME", org_id=7, lease_ms=3000, heartbeat_ms=100,
                     max_body_bytes=65536, features=features)
        h.next_event(SessionReady)

    def assign(self, h: Harness, jobs: List[int]) -> None:
        h.link.claim(len(jobs), 0)
        claim = h.expect("CLAIM")
        h.fake.reply(claim, "ASSIGNED", jobs=[{
            "job_id": j, "generation": 1, "lease_expires_at_us": 0, "lease_ms": 3000,
            "attempts": 1, "priority": 0, "payload": "doc"} for j in jobs])
        for _ in jobs:
            h.next_event(JobAssigned)

    def settle(self, h: Harness) -> None:
        for _ in range(200):
            if h.link.pending() == 0:
                return
            h.pump()
        self.fail(f"{h.link.pending()} requests still pending")

    def test_a_granted_session_renews_every_held_job_with_one_renew(self) -> None:
        h = self.harness()
        h.link.start()
        self.session(h, [RENEW_HELD])
        self.assign(h, [21, 22, 23])
        self.assign(h, [24])
        renew = h.expect("RENEW")
        jobs = named(renew)
        self.assertEqual(sorted(j for _, j in jobs), [21, 22, 23, 24])
        self.assertEqual(len({q for q, _ in jobs}), 4)
        # One place under max_in_flight, as at the coordinator.
        self.assertEqual(h.link._in_flight(), 1)
        for req, job in jobs:
            to = Request(renew.identity, "RENEW", {"req": req})
            if job == 23:
                h.fake.reply(to, "REVOKED", job_id=job, generation=1, reason="stale_generation",
                             detail="current generation is 2")
            else:
                h.fake.reply(to, "LEASE", job_id=job, generation=1, lease_expires_at_us=0,
                             lease_ms=3000)
        lost = h.next_event(JobLost)
        self.assertEqual((lost.job, lost.reason), ((23, 1), "stale_generation"))
        self.settle(h)
        self.assertEqual(h.link.stats.renewals, 3)
        self.assertEqual(len(h.link.held), 3)
        again = h.expect("RENEW")
        self.assertEqual(sorted(j for _, j in named(again)), [21, 22, 24])

    def test_without_the_grant_each_job_has_its_own_renew(self) -> None:
        h = self.harness()
        h.link.start()
        self.session(h, [])
        self.assign(h, [31, 32])
        first, second = h.expect("RENEW"), h.expect("RENEW")
        self.assertNotIn("held", first.body)
        self.assertNotIn("held", second.body)
        self.assertEqual(sorted([first.body["job_id"], second.body["job_id"]]), [31, 32])

    def test_renew_held_false_does_not_ask_for_it(self) -> None:
        h = self.harness(renew_held=False)
        h.link.start()
        hello = h.expect("HELLO")
        self.assertEqual(hello.body["features"],
                         ["complete_claim", "reconnect_hints", "progress"])

    def test_a_renew_of_several_jobs_refused_as_a_message_is_not_sent_again(self) -> None:
        h = self.harness()
        h.link.start()
        self.session(h, [RENEW_HELD])
        self.assign(h, [41, 42])
        renew = h.expect("RENEW")
        self.assertEqual(len(renew.body["held"]), 1)
        # One ERROR for the whole message: the held job's renewal is given up with it, and from
        # now on every job is renewed alone.
        h.fake.reply(renew, "ERROR", code="invalid", text="RENEW: field 'held' is wrong")
        self.settle(h)
        first, second = h.expect("RENEW"), h.expect("RENEW")
        self.assertNotIn("held", first.body)
        self.assertNotIn("held", second.body)
        self.assertEqual(len(h.link.held), 2)


class RenewHeldSchedule(unittest.TestCase):
    def test_renewals_taken_with_a_look_ahead_fall_into_one_heartbeat(self) -> None:
        held = HeldJobs(heartbeat_s=0.1)
        held.add((1, 1), 0.3, 0.0)
        held.add((2, 1), 0.3, 0.03)
        held.add((3, 1), 0.3, 0.08)
        self.assertEqual(held.take_due(0.099, 0.05), [])
        self.assertEqual(held.take_due(0.1, 0.05), [(1, 1), (2, 1)])
        held.renewed((1, 1), 0.3)
        held.renewed((2, 1), 0.3)
        self.assertEqual(held.take_due(0.18, 0.05), [(1, 1), (2, 1), (3, 1)])


class RenewHeldExamples(unittest.TestCase):
    def test_the_protocol_1_3_examples_are_what_the_link_sends_and_reads(self) -> None:
        with open(PROTOCOL_MD, encoding="utf-8") as f:
            lines = re.findall(r"^([A-Z_]+) +(\{.*\})$", f.read(), re.M)
        newest = [(k, json.loads(b)) for k, b in lines if RENEW_HELD in b or '"held"' in b]
        kinds = sorted({k for k, _ in newest})
        self.assertEqual(kinds, ["HELLO", "RENEW", "WELCOME"])
        for kind, body in newest:
            if kind == "WELCOME":
                self.assertIn(RENEW_HELD, _wire.decode(
                    [_wire.TAG, b"WELCOME", json.dumps(body).encode()])[1]["features"])
            if kind == "RENEW":
                for entry in body["held"]:
                    self.assertEqual(sorted(entry), ["generation", "job_id", "req"])
        # The answers that follow the RENEW are read by the link as any LEASE or REVOKED.
        for kind, body in lines:
            if kind in ("LEASE", "REVOKED"):
                _wire.decode([_wire.TAG, kind.encode(), body.encode()])


if __name__ == "__main__":
    unittest.main()
