#!/usr/bin/env python3
"""An aclaim reviewer in 30 lines: serves review jobs until Ctrl-C or SIGTERM.

  reviewer.py --connect tcp://127.0.0.1:5555 --org 1 --queues electrical      # plaintext
  reviewer.py --connect tcp://a:5555,tcp://b:5555 --id rev-1 \\
              --server-key coordinator.pub --curve-secret-key-file rev-1.key  # CURVE

The secret key is read from a file (mode 0600), never from the command line, where ps shows it;
ACLAIM_CURVE_SECRET_KEY_FILE and ACLAIM_CURVE_SERVER_KEY(_FILE) work as for aclaim-worker.
"""
import argparse, hashlib, logging, os  # noqa: E401
import aclaim


def review(job: aclaim.Job) -> str:
    for _ in range(5):  # a review in steps, given up as soon as the job is taken away
        if job.cancellation.wait(0.1):
            raise aclaim.Cancelled(job.cancellation.reason)
    if not job.payload.strip():
        raise aclaim.FailJob("empty document", retryable=False)
    return f"review:{job.job_id}:{hashlib.sha256(job.payload.encode()).hexdigest()[:12]}"


def report(v: aclaim.Verdict) -> None:
    print(f"job {v.job_id} gen {v.generation}: {v.op} "
          f"{v.state if v.accepted else 'rejected: ' + v.reason}", flush=True)


p = argparse.ArgumentParser(description="an aclaim reviewer")
p.add_argument("--connect", default=os.environ.get("ACLAIM_CONNECT", "tcp://127.0.0.1:5555"),
               help="endpoints, comma-separated (ACLAIM_CONNECT, as the C++ worker)")
p.add_argument("--id", default="py-reviewer", help="worker name (under CURVE: the key's)")
p.add_argument("--org", type=int, default=1, help="organization, plaintext mode only")
p.add_argument("--queues", default="", help="comma-separated skills (default: default)")
p.add_argument("--server-key", help="the coordinator's public key file: enables CURVE")
p.add_argument("--curve-secret-key-file", "--key", dest="key",
               default=os.environ.get("ACLAIM_CURVE_SECRET_KEY_FILE"),
               help="this reviewer's secret key file (0600), from aclaimctl keys generate")
a = p.parse_args()
logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
if a.server_key:
    curve = aclaim.CurveKeys.from_files(a.server_key, a.key)
else:
    curve = aclaim.CurveKeys.from_env()  # None without ACLAIM_CURVE_SERVER_KEY(_FILE): plaintext
worker = aclaim.Worker(a.connect.split(","), a.id, org_id=a.org, curve=curve, concurrency=2,
                       queues=[q for q in a.queues.split(",") if q], on_verdict=report)
worker.run(review)
print(f"stopped: {worker.stats.completed} completed, {worker.stats.failed} failed, "
      f"{worker.stats.revoked} revoked, {worker.stats.reconnects} reconnects")
