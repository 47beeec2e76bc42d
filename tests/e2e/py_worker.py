#!/usr/bin/env python3
"""A reviewer written in Python speaking the JSON encoding of docs/protocol.md.

It proves that a worker in another language can take part: HELLO, CLAIM (long-poll until a job
arrives), RENEW once per job and whenever the heartbeat interval passes, COMPLETE, BYE. Prints
one JSON line summarising what happened and exits 0 when every claimed job was accepted.

Needs only pyzmq (Debian's python3-zmq): /usr/bin/python3 tests/e2e/py_worker.py --org 1
"""

import argparse
import json
import sys
import time

import zmq

TAG = b"ACLAIM/1+json"


class ProtocolError(Exception):
    pass


class Session:
    def __init__(self, endpoint, timeout_s):
        self.ctx = zmq.Context.instance()
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 500)
        self.sock.connect(endpoint)
        self.timeout_s = timeout_s
        self.next_req = 1
        self.revoked = []  # pushed REVOKED notices (req 0)

    def send(self, kind, **fields):
        req = self.next_req
        self.next_req += 1
        fields = {"req": req, **fields}
        self.sock.send_multipart([TAG, kind.encode(), json.dumps(fields).encode()])
        return req

    def call(self, kind, extra_wait_s=0.0, **fields):
        """Sends a request and returns (reply type, body) of the reply carrying its id."""
        req = self.send(kind, **fields)
        deadline = time.monotonic() + self.timeout_s + extra_wait_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not self.sock.poll(int(left * 1000)):
                raise ProtocolError(f"no reply to {kind} (req {req})")
            frames = self.sock.recv_multipart()
            if len(frames) != 3 or not frames[0].startswith(b"ACLAIM/1"):
                raise ProtocolError(f"unexpected frames {frames!r}")
            reply_type, body = frames[1].decode(), json.loads(frames[2])
            if body.get("req") == req:
                return reply_type, body
            if reply_type == "REVOKED" and body.get("req") == 0:
                self.revoked.append(body)
                continue
            # A reply to an earlier request we stopped waiting for: not ours to judge now.

    def close(self):
        self.send("BYE")  # BYE is not answered
        self.sock.close()


def expect(kind, reply, wanted):
    if kind != wanted:
        raise ProtocolError(f"expected {wanted}, got {kind} {reply}")
    return reply


def run(args):
    summary = {"worker": args.id, "org": args.org, "claimed": 0, "renewed": 0, "completed": 0,
               "replayed": 0, "rejected": [], "revoked": 0}
    s = Session(args.connect, args.reply_timeout)
    welcome = expect(*s.call("HELLO", worker_id=args.id, org_id=args.org), "WELCOME")
    heartbeat_s = welcome["heartbeat_ms"] / 1000.0
    summary["lease_ms"] = welcome["lease_ms"]

    deadline = time.monotonic() + args.timeout
    while summary["completed"] + len(summary["rejected"]) < args.jobs:
        if time.monotonic() > deadline:
            raise ProtocolError("no job arrived before the deadline")
        kind, reply = s.call("CLAIM", extra_wait_s=args.claim_wait_ms / 1000.0,
                             max_jobs=1, wait_ms=args.claim_wait_ms)
        if kind == "NO_WORK":
            continue
        jobs = expect(kind, reply, "ASSIGNED")["jobs"]
        for job in jobs:
            summary["claimed"] += 1
            ref = {"job_id": job["job_id"], "generation": job["generation"]}
            review_until = time.monotonic() + args.review_ms / 1000.0
            lost = False
            # Renew once at once (to exercise RENEW), then at every heartbeat while reviewing.
            while True:
                kind, reply = s.call("RENEW", **ref)
                if kind == "REVOKED":
                    summary["revoked"] += 1
                    lost = True
                    break
                expect(kind, reply, "LEASE")
                summary["renewed"] += 1
                if time.monotonic() >= review_until:
                    break
                time.sleep(min(heartbeat_s, max(0.0, review_until - time.monotonic())))
            if lost or any(r["job_id"] == job["job_id"] for r in s.revoked):
                continue
            result_ref = f"review:{args.id}:{job['job_id']}:{job['generation']}"
            kind, reply = s.call("COMPLETE", result_ref=result_ref, **ref)
            if kind == "ACCEPTED":
                summary["completed"] += 1
                summary["replayed"] += 1 if reply["replayed"] else 0
            elif kind == "REJECTED":
                summary["rejected"].append(reply["reason"])
            else:
                raise ProtocolError(f"COMPLETE answered {kind} {reply}")
    s.close()
    summary["ok"] = summary["completed"] == args.jobs
    return summary


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--connect", default="tcp://127.0.0.1:5555")
    p.add_argument("--org", type=int, default=1)
    p.add_argument("--id", default="py-reviewer")
    p.add_argument("--jobs", type=int, default=1, help="jobs to complete before exiting")
    p.add_argument("--review-ms", type=int, default=100)
    p.add_argument("--claim-wait-ms", type=int, default=2000)
    p.add_argument("--reply-timeout", type=float, default=5.0, help="seconds per reply")
    p.add_argument("--timeout", type=float, default=20.0, help="seconds to wait for work")
    args = p.parse_args()
    try:
        summary = run(args)
    except (ProtocolError, zmq.ZMQError, ValueError, KeyError) as e:
        print(json.dumps({"worker": args.id, "ok": False, "error": str(e)}))
        return 1
    print(json.dumps(summary))
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
