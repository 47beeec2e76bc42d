#!/usr/bin/env python3
"""A reviewer process that hands its job to an outside system (protocol 1.6, PARK), for
test_e2e_park.py: it greets a coordinator asking for the ``park`` feature, claims one job of a
queue, parks it for --timeout-ms and prints PARKED's body (the token and the deadline) as one JSON
line on stdout, then says BYE and exits. It speaks the wire protocol's JSON encoding directly
(docs/protocol.md), so that the test exercises the messages and not a client library.

    park_worker.py ENDPOINT WORKER_ID ORG QUEUE TIMEOUT_MS NOTE [SERVER_PUB CLIENT_PUB CLIENT_SEC]
"""

import json
import sys

import zmq

TAG = b"ACLAIM/1+json"


def main() -> int:
    endpoint, worker_id, org, queue, timeout_ms, note = sys.argv[1:7]
    context = zmq.Context()
    s = context.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 1000)
    if len(sys.argv) == 10:
        s.curve_serverkey, s.curve_publickey, s.curve_secretkey = (
            k.encode() for k in sys.argv[7:10])
    s.connect(endpoint)
    poller = zmq.Poller()
    poller.register(s, zmq.POLLIN)

    def ask(kind: str, body: dict) -> tuple:
        s.send_multipart([TAG, kind.encode(), json.dumps(body).encode()])
        if not poller.poll(15_000):
            raise SystemExit(f"no answer to {kind}")
        _, reply, raw = s.recv_multipart()
        return reply.decode(), json.loads(raw)

    kind, welcome = ask("HELLO", {"req": 1, "worker_id": worker_id, "org_id": int(org),
                                  "queues": [queue], "features": ["park"]})
    if kind != "WELCOME" or "park" not in welcome.get("features", []):
        raise SystemExit(f"HELLO answered {kind} {welcome}")
    kind, assigned = ask("CLAIM", {"req": 2, "max_jobs": 1, "wait_ms": 10_000})
    if kind != "ASSIGNED":
        raise SystemExit(f"CLAIM answered {kind} {assigned}")
    job = assigned["jobs"][0]
    kind, parked = ask("PARK", {"req": 3, "job_id": job["job_id"],
                                "generation": job["generation"], "timeout_ms": int(timeout_ms),
                                "note": note})
    if kind != "PARKED":
        raise SystemExit(f"PARK answered {kind} {parked}")
    print(json.dumps(parked), flush=True)
    s.send_multipart([TAG, b"BYE", json.dumps({"req": 4}).encode()])
    s.close()
    context.term()
    return 0


if __name__ == "__main__":
    sys.exit(main())
