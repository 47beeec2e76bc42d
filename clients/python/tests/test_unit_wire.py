"""The pieces without sockets: the JSON encoding against docs/protocol.md's own examples, the
checks on what a worker sends, the renewal schedule of held jobs (times handed in, no clock),
and CURVE keys as aclaimctl writes them."""

from __future__ import annotations

import json
import os
import re
import tempfile
import unittest

import zmq

import checkout

checkout.use()
from aclaim import CurveKeys, _wire  # noqa: E402
from aclaim._held import HeldJobs  # noqa: E402

PROTOCOL_MD = os.path.join(checkout.PACKAGE_ROOT, "..", "..", "docs", "protocol.md")


def protocol_examples() -> dict:
    """The "JSON examples" block of docs/protocol.md: type -> body."""
    with open(PROTOCOL_MD, encoding="utf-8") as f:
        text = f.read()
    block = text.split("### JSON examples", 1)[1].split("```", 2)[1]
    examples = {}
    for line in block.strip().splitlines():
        kind, body = re.match(r"(\w+)\s+(\{.*\})$", line.strip()).groups()
        examples[kind] = body
    return examples


class Wire(unittest.TestCase):
    def test_every_reply_example_of_the_protocol_document_decodes(self) -> None:
        examples = protocol_examples()
        replies = [k for k in examples if k in _wire._REPLY_FIELDS]
        self.assertEqual(sorted(replies), sorted(_wire._REPLY_FIELDS))
        for kind in replies:
            decoded_kind, body = _wire.decode([_wire.TAG, kind.encode(),
                                               examples[kind].encode()])
            self.assertEqual((decoded_kind, body), (kind, json.loads(examples[kind])))

    def test_requests_carry_exactly_the_members_of_the_protocols_examples(self) -> None:
        examples = protocol_examples()
        for kind in ("HELLO", "CLAIM", "RENEW", "COMPLETE", "FAIL", "RELEASE", "BYE"):
            fields = json.loads(examples[kind])
            tag, type_frame, body = _wire.encode(kind, fields)
            self.assertEqual((tag, type_frame), (b"ACLAIM/1+json", kind.encode()))
            self.assertEqual(json.loads(body), fields)

    def test_non_ascii_text_is_sent_as_raw_utf8(self) -> None:
        body = _wire.encode("FAIL", {"req": 1, "reason": "Prüfung fehlgeschlagen"})[2]
        self.assertIn("Prüfung".encode("utf-8"), body)

    def test_a_malformed_reply_is_refused_with_what_is_wrong(self) -> None:
        cases = [
            ([b"ACLAIM/1", b"NO_WORK", b"\x01"], "unexpected tag"),
            ([_wire.TAG, b"HELLO", b"{}"], "unexpected message type"),
            ([_wire.TAG, b"NO_WORK", b"{"], "not UTF-8 JSON"),
            ([_wire.TAG, b"NO_WORK", b'{"req": 1}'], "missing members"),
            ([_wire.TAG, b"ACCEPTED", b'{"req": 1, "job_id": 1, "generation": 1, "state": "x",'
                                      b' "replayed": 1}'], "'replayed' is not of type bool"),
            ([_wire.TAG, b"ASSIGNED", b'{"req": 1, "jobs": [{"job_id": 1}]}'],
             "jobs[0]: missing"),
            ([_wire.TAG, b"NO_WORK"], "expected 3 frames"),
        ]
        for frames, text in cases:
            with self.assertRaises(_wire.WireError) as e:
                _wire.decode(frames)
            self.assertIn(text, str(e.exception))

    def test_a_member_from_a_later_minor_version_is_ignored(self) -> None:
        kind, body = _wire.decode([_wire.TAG, b"NO_WORK",
                                   b'{"req": 2, "reason": "wait ended", "hint": 5}'])
        self.assertEqual(body["reason"], "wait ended")

    def test_what_a_worker_sends_is_checked_against_the_protocols_ranges(self) -> None:
        self.assertEqual(_wire.check_queues(["electrical", "a.b:c-d_1"]),
                         ["electrical", "a.b:c-d_1"])
        for bad in (["-x"], ["x" * 65], [""], ["a b"], "electrical", ["q"] * 33):
            with self.assertRaises(ValueError):
                _wire.check_queues(bad)
        for bad in ("", "x" * 129, "tab\there", "é"):
            with self.assertRaises(ValueError):
                _wire.check_worker_id(bad)
        self.assertEqual(_wire.check_result_ref("é" * 512), "é" * 512)  # 1024 bytes
        for bad in ("", "é" * 513, "\ud800"):
            with self.assertRaises(ValueError):
                _wire.check_result_ref(bad)
        with self.assertRaises(TypeError):
            _wire.check_result_ref(42)  # type: ignore[arg-type]

    def test_a_reason_is_clipped_on_a_character_boundary(self) -> None:
        clipped = _wire.clip_text("é" * 600)
        self.assertEqual(clipped, "é" * 512)
        self.assertEqual(_wire.clip_text("bad \ud800 surrogate"), "bad ? surrogate")


class Held(unittest.TestCase):
    def test_renewals_fall_due_one_heartbeat_apart_and_not_twice_in_flight(self) -> None:
        h = HeldJobs(heartbeat_s=1.0)
        h.add((1, 4), lease_s=3.0, now=100.0)
        self.assertEqual(h.take_due(100.9), [])
        self.assertEqual(h.take_due(101.0), [(1, 4)])
        self.assertEqual(h.take_due(102.5), [])  # the first is still in flight
        h.renewed((1, 4), lease_s=3.0)
        self.assertEqual(h.lease_deadline(1), 104.0)  # from when the renewal was sent
        self.assertEqual(h.take_due(102.0), [(1, 4)])

    def test_a_lease_runs_out_only_for_a_job_still_renewing(self) -> None:
        h = HeldJobs(heartbeat_s=1.0)
        h.add((1, 1), lease_s=3.0, now=0.0)
        h.add((2, 1), lease_s=3.0, now=0.0)
        h.stop_renewing(2)  # its outcome is on its way
        self.assertEqual(h.take_expired(2.9), [])
        self.assertEqual(h.take_expired(3.0), [(1, 1)])
        self.assertEqual(h.all(), [(2, 1)])

    def test_a_stale_generation_changes_nothing(self) -> None:
        h = HeldJobs()
        h.add((1, 2), lease_s=3.0, now=0.0)
        self.assertFalse(h.remove((1, 1)))
        h.renewed((1, 1), lease_s=100.0)
        self.assertEqual(h.lease_deadline(1), 3.0)
        self.assertTrue(h.remove((1, 2)))

    def test_after_a_reconnect_everything_is_renewed_at_once(self) -> None:
        h = HeldJobs(heartbeat_s=10.0)
        h.add((1, 1), lease_s=30.0, now=0.0)
        h.add((2, 1), lease_s=30.0, now=0.0)
        h.take_due(10.0)
        h.renew_all_now(12.0)
        self.assertEqual(sorted(h.take_due(12.0)), [(1, 1), (2, 1)])

    def test_a_busy_coordinator_gets_the_renewal_again_soon(self) -> None:
        h = HeldJobs(heartbeat_s=10.0)
        h.add((1, 1), lease_s=30.0, now=0.0)
        h.take_due(10.0)
        h.retry_renewal(1, at=10.2)
        self.assertEqual(h.next_due(), 10.2)


class Keys(unittest.TestCase):
    def test_keys_from_the_files_aclaimctl_writes(self) -> None:
        server_public, _ = zmq.curve_keypair()
        public, secret = zmq.curve_keypair()
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "coordinator.pub"), "wb") as f:
                f.write(server_public + b"\n")
            key_file = os.path.join(d, "rev-1.key")
            with open(os.open(key_file, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as f:
                f.write(secret + b"\n")
            keys = CurveKeys.from_files(os.path.join(d, "coordinator.pub"), key_file)
            self.assertEqual((keys.server_public, keys.client_public, keys.client_secret),
                             (server_public.decode(), public.decode(), secret.decode()))
            os.chmod(key_file, 0o644)
            with self.assertRaisesRegex(ValueError, "readable by its group or others"):
                CurveKeys.from_files(os.path.join(d, "coordinator.pub"), key_file)
            os.chmod(key_file, 0o600)
            with self.assertRaisesRegex(ValueError, "cannot read"):
                CurveKeys.from_files(os.path.join(d, "missing.pub"), key_file)

    def test_the_secret_key_file_only_its_owner_may_read(self) -> None:
        server_public, _ = zmq.curve_keypair()
        public, secret = zmq.curve_keypair()
        with tempfile.TemporaryDirectory() as d:
            key_file = os.path.join(d, "rev-1.key")
            with open(os.open(key_file, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as f:
                f.write(secret + b"\n")
            keys = CurveKeys.from_secret_file(server_public.decode(), key_file)
            self.assertEqual((keys.client_public, keys.client_secret),
                             (public.decode(), secret.decode()))
            # Group-readable is refused as others-readable is, naming the file and its mode.
            for mode in (0o640, 0o604, 0o660):
                os.chmod(key_file, mode)
                with self.assertRaisesRegex(ValueError, f"{key_file}.*mode {mode:04o}.*chmod 600"):
                    CurveKeys.from_secret_file(server_public.decode(), key_file)
            os.chmod(key_file, 0o600)
            with self.assertRaisesRegex(ValueError, "not a regular file"):
                CurveKeys.from_secret_file(server_public.decode(), d)

    def test_keys_from_the_variables_aclaim_worker_reads(self) -> None:
        server_public, _ = zmq.curve_keypair()
        public, secret = zmq.curve_keypair()
        with tempfile.TemporaryDirectory() as d:
            key_file = os.path.join(d, "rev-1.key")
            with open(os.open(key_file, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as f:
                f.write(secret + b"\n")
            self.assertIsNone(CurveKeys.from_env({}))
            keys = CurveKeys.from_env({"ACLAIM_CURVE_SERVER_KEY": server_public.decode(),
                                       "ACLAIM_CURVE_SECRET_KEY_FILE": key_file})
            self.assertEqual((keys.server_public, keys.client_public),
                             (server_public.decode(), public.decode()))
            pub_file = os.path.join(d, "coordinator.pub")
            with open(pub_file, "wb") as f:
                f.write(server_public + b"\n")
            keys = CurveKeys.from_env({"ACLAIM_CURVE_SERVER_KEY_FILE": pub_file,
                                       "ACLAIM_CURVE_SECRET_KEY_FILE": key_file})
            self.assertEqual(keys.server_public, server_public.decode())
            # The secret only from a file: a key in the environment is refused, not taken.
            with self.assertRaisesRegex(ValueError, "ACLAIM_CURVE_SECRET_KEY_FILE"):
                CurveKeys.from_env({"ACLAIM_CURVE_SERVER_KEY": server_public.decode(),
                                    "ACLAIM_CURVE_SECRET_KEY": secret.decode()})
            os.chmod(key_file, 0o644)
            with self.assertRaisesRegex(ValueError, "chmod 600"):
                CurveKeys.from_env({"ACLAIM_CURVE_SERVER_KEY": server_public.decode(),
                                    "ACLAIM_CURVE_SECRET_KEY_FILE": key_file})

    def test_a_key_that_is_not_z85_or_not_the_pairs_is_refused(self) -> None:
        server_public, _ = zmq.curve_keypair()
        public, secret = zmq.curve_keypair()
        other_public, _ = zmq.curve_keypair()
        with self.assertRaisesRegex(ValueError, "40-character"):
            CurveKeys.from_secret(server_public.decode(), "short")
        with self.assertRaisesRegex(ValueError, "not Z85"):
            CurveKeys.from_secret(server_public.decode(), '"' * 40)
        with self.assertRaisesRegex(ValueError, "not the one of its secret"):
            CurveKeys(server_public.decode(), other_public.decode(), secret.decode())


if __name__ == "__main__":
    unittest.main()
