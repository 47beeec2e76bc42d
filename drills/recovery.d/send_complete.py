#!/usr/bin/python3
"""Sends one COMPLETE to a coordinator in the JSON encoding and prints the answer.

A drill uses it to replay what a reviewer that slept through an outage would send: a completion
quoting the generation it was granted before the outage. Needs Debian's python3-zmq.

    send_complete.py --endpoint tcp://127.0.0.1:5555 --org 2 --worker rev-2a \
        --job 206 --generation 1 --ref results/2/206-stale.json

Against a CURVE coordinator pass its public key and the worker's key pair, registered for the
organization under the worker's name (`aclaimctl keys register`): --curve-server-key and
--curve-public-key, and the secret in ACLAIM_CURVE_SECRET_KEY (the environment, not argv, where
ps shows it), as aclaim-worker takes them. Under CURVE the coordinator takes the organization
from the key, and --org only goes into HELLO.

Prints one JSON line {"type": "REJECTED", "body": {...}} and exits 0 when an answer arrived,
1 when none arrived within --timeout-ms, 2 when the session was not welcomed (a refused CURVE
handshake looks the same: no WELCOME).
"""

import argparse
import json
import os
import sys

import zmq

TAG = b"ACLAIM/1+json"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--endpoint", required=True)
    p.add_argument("--org", type=int, required=True)
    p.add_argument("--worker", required=True)
    p.add_argument("--job", type=int, required=True)
    p.add_argument("--generation", type=int, required=True)
    p.add_argument("--ref", required=True)
    p.add_argument("--timeout-ms", type=int, default=10000)
    p.add_argument("--curve-server-key", default="", help="coordinator's public key (Z85)")
    p.add_argument("--curve-public-key", default="", help="this worker's public key (Z85)")
    a = p.parse_args()
    secret = os.environ.get("ACLAIM_CURVE_SECRET_KEY", "")
    if a.curve_server_key and not (a.curve_public_key and secret):
        p.error("--curve-server-key needs --curve-public-key and ACLAIM_CURVE_SECRET_KEY")

    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    if a.curve_server_key:
        sock.curve_serverkey = a.curve_server_key.encode()
        sock.curve_publickey = a.curve_public_key.encode()
        sock.curve_secretkey = secret.encode()
    sock.connect(a.endpoint)

    def call(req, kind, **fields):
        sock.send_multipart([TAG, kind.encode(), json.dumps(dict(req=req, **fields)).encode()])
        # Skip anything that is not the answer, e.g. a pushed REVOKED (req 0).
        while sock.poll(a.timeout_ms):
            frames = sock.recv_multipart()
            if len(frames) != 3:
                continue
            body = json.loads(frames[2])
            if body.get("req") == req:
                return frames[1].decode(), body
        return None, None

    try:
        kind, body = call(1, "HELLO", worker_id=a.worker, org_id=a.org)
        if kind != "WELCOME":
            print(json.dumps({"type": kind, "body": body}))
            return 2
        kind, body = call(2, "COMPLETE", job_id=a.job, generation=a.generation,
                          result_ref=a.ref)
        if kind is None:
            print(json.dumps({"type": None, "body": "no answer within %d ms" % a.timeout_ms}))
            return 1
        print(json.dumps({"type": kind, "body": body}))
        sock.send_multipart([TAG, b"BYE", json.dumps({"req": 3}).encode()])
        return 0
    finally:
        sock.close()
        ctx.term()


if __name__ == "__main__":
    sys.exit(main())
