#!/usr/bin/env python3
"""What a coordinator's /readyz said during the failover drill.

    readyz_watch.py --port PORT --out FILE [--max-seconds S]
        asks http://127.0.0.1:PORT/readyz every 200 ms (each ask bounded by 1 s) and appends
        "EPOCH_SECONDS STATUS" per answer to FILE (STATUS 0: no answer); stops after S seconds
        (default 600) or on SIGTERM
    readyz_watch.py --summarize FILE --from A --to B
        prints how long, between epoch seconds A and B, the answers were not 200 (e.g. "6.2 s")
"""

import argparse
import signal
import sys
import time
import urllib.error
import urllib.request


def watch(port, out, max_seconds):
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    end = time.monotonic() + max_seconds
    with open(out, "a", buffering=1) as f:
        while time.monotonic() < end:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as r:
                    status = r.status
            except urllib.error.HTTPError as e:
                status = e.code
            except Exception:  # noqa: BLE001 - any failure to get an answer is "no answer"
                status = 0
            f.write(f"{time.time():.3f} {status}\n")
            time.sleep(0.2)


def summarize(path, start, stop):
    samples = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 2:
                samples.append((float(parts[0]), int(parts[1])))
    samples = [s for s in samples if start <= s[0] <= stop]
    # Each answer stands until the next one.
    down = sum(b[0] - a[0] for a, b in zip(samples, samples[1:]) if a[1] != 200)
    print(f"{down:.1f} s" if samples else "no samples")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int)
    p.add_argument("--out")
    p.add_argument("--max-seconds", type=float, default=600)
    p.add_argument("--summarize")
    p.add_argument("--from", dest="start", type=float)
    p.add_argument("--to", dest="stop", type=float)
    a = p.parse_args()
    if a.summarize:
        summarize(a.summarize, a.start, a.stop)
    elif a.port and a.out:
        watch(a.port, a.out, a.max_seconds)
    else:
        p.error("--port and --out, or --summarize with --from and --to")


if __name__ == "__main__":
    main()
