"""How the link spaces its reconnections (docs/protocol.md, "Reconnecting a fleet"): the first
after a lost session a uniform share of a window sized by WELCOME's ``sessions``, later ones a
jittered back-off, never sooner than a coordinator's retry_after_ms. The link's own arithmetic on
a seeded generator and an injected clock: a thousand simulated workers, no sockets, no sleeps."""

from __future__ import annotations

import random
import unittest
from typing import List, Optional

import zmq

import checkout

checkout.use()

from aclaim import _link
from aclaim._events import LinkOptions
from aclaim._link import Link


def first_waits(workers: int, fleet: Optional[int],
                retry_after: Optional[float] = None) -> List[float]:
    ctx = zmq.Context.instance()
    out = []
    for i in range(workers):
        link = Link(ctx, LinkOptions(endpoints=["tcp://127.0.0.1:1"], worker_id=f"w-{i}",
                                     rng=random.Random(i), clock=lambda: 1000.0))
        link._fleet = fleet
        out.append(link._reconnect_delay(0.1, 1000.0, retry_after))
    return out


class ReconnectSpreadTest(unittest.TestCase):
    def test_window_follows_the_fleet_within_bounds(self) -> None:
        self.assertEqual(_link.spread_window(None), 0.1)
        self.assertEqual(_link.spread_window(16), 0.1)
        self.assertAlmostEqual(_link.spread_window(10_000), 20.0)
        self.assertEqual(_link.spread_window(10**12), 60.0)

    def test_a_thousand_first_attempts_cover_the_window_evenly(self) -> None:
        waits = first_waits(1000, 10_000)
        window = _link.spread_window(10_000)
        self.assertTrue(all(0 <= w <= window for w in waits))
        bins = [0] * 10
        for w in waits:
            bins[min(9, int(w * 10 / window))] += 1
        for n in bins:
            self.assertTrue(60 <= n <= 140, bins)
        mean = sum(waits) / len(waits)
        self.assertTrue(0.45 * window < mean < 0.55 * window, mean)

    def test_later_attempts_back_off_and_retry_after_is_honoured(self) -> None:
        link = Link(zmq.Context.instance(),
                    LinkOptions(endpoints=["tcp://127.0.0.1:1"], worker_id="w",
                                rng=random.Random(3), clock=lambda: 1000.0))
        link._fleet = 10_000
        link._reconnect_delay(0.1, 1000.0, None)
        later = link._reconnect_delay(0.4, 1000.0, None)
        self.assertTrue(0.2 <= later <= 0.4, later)
        for w in first_waits(1000, None, retry_after=3.0):
            self.assertTrue(3.0 <= w <= 3.1, w)
        # Over a worker's own later draw too.
        self.assertGreaterEqual(link._reconnect_delay(0.4, 1000.0, 2.5), 2.5)

    def test_a_busy_worker_comes_back_within_a_heartbeat(self) -> None:
        link = Link(zmq.Context.instance(),
                    LinkOptions(endpoints=["tcp://127.0.0.1:1"], worker_id="w",
                                rng=random.Random(4), clock=lambda: 1000.0))
        link._fleet = 10_000
        link.held.heartbeat_s = 3.3
        link.held.add((1, 1), 10.0, 1000.0)
        self.assertLessEqual(link._reconnect_delay(0.1, 1000.0, None), 3.3)
        # Even when a draining coordinator asks for longer: its leases would not outlive that.
        link._attempts = 0
        self.assertLessEqual(link._reconnect_delay(0.1, 1000.0, 15.0), 3.3)


class ReconnectWireTest(unittest.TestCase):
    def test_the_protocol_1_3_examples_decode_with_their_members(self) -> None:
        import json
        import os
        import re
        from aclaim import _wire
        doc = os.path.join(os.path.dirname(__file__), "..", "..", "..", "docs", "protocol.md")
        with open(doc, encoding="utf-8") as f:
            lines = re.findall(r"^([A-Z_]+) +(\{.*\})$", f.read(), re.M)
        newer = {k: b for k, b in lines if '"sessions"' in b or '"retry_after_ms"' in b}
        self.assertEqual(sorted(newer), ["ERROR", "WELCOME"])
        _, welcome = _wire.decode([_wire.TAG, b"WELCOME", newer["WELCOME"].encode()])
        self.assertEqual(welcome["sessions"], 10016)
        _, error = _wire.decode([_wire.TAG, b"ERROR", newer["ERROR"].encode()])
        self.assertEqual((error["code"], error["retry_after_ms"]), ("draining", 14400))
        with self.assertRaises(_wire.WireError):
            _wire.decode([_wire.TAG, b"ERROR", json.dumps(
                {"req": 1, "code": "draining", "text": "", "retry_after_ms": "1"}).encode()])


if __name__ == "__main__":
    unittest.main()
