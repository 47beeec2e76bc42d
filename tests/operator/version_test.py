#!/usr/bin/env python3
"""One version everywhere: every program the build makes answers --version with exit 0 and one
line on stdout, "NAME VERSION (protocol 1.0-1.6)", VERSION being the top-level VERSION file and the
protocol range the one docs/protocol.md is titled with; the Python client in the checkout reports
the same VERSION (docs/operations.md, "Versions and releases").

  version_test.py --bin-dir build/bin --root .

Every aclaim-* program found in --bin-dir is run, so a new one is checked without being listed;
the ones listed below must be there. Run with the Python that has pyzmq (the suite's
ACLAIM_PYTHON), which imports the client. Prints PASS/FAIL per check and ends with "N passed, M
failed".
"""

import argparse
import os
import re
import subprocess
import sys

# Built wherever the project builds; aclaim-metrics-cost only where prometheus-cpp is installed,
# so it is checked when found and not required.
REQUIRED = ["aclaim-coordinator", "aclaim-worker", "aclaimctl", "aclaim-console", "aclaim-bench",
            "aclaim-canary", "aclaim-lockprobe"]


def programs(bin_dir):
    found = [n for n in sorted(os.listdir(bin_dir))
             if (n.startswith("aclaim-") or n == "aclaimctl")
             and os.access(os.path.join(bin_dir, n), os.X_OK)]
    return sorted(set(found) | set(REQUIRED))


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin-dir", required=True)
    p.add_argument("--root", required=True, help="the checkout (VERSION, docs/, clients/python)")
    args = p.parse_args()
    root = os.path.abspath(args.root)
    with open(os.path.join(root, "VERSION")) as f:
        version = f.readline().strip()
    with open(os.path.join(root, "docs", "protocol.md")) as f:
        title = f.readline()
    newest = re.search(r"version (\d+\.\d+)", title)
    protocols = f"1.0-{newest.group(1)}" if newest else "?"
    print(f"VERSION {version}, protocol {protocols} (docs/protocol.md: {title.strip()!r})")

    passed = failed = 0

    def check(ok, what, why=""):
        nonlocal passed, failed
        if ok:
            passed += 1
            print(f"PASS: {what}")
        else:
            failed += 1
            print(f"FAIL: {what}" + (f"\n      {why}" if why else ""))

    check(re.fullmatch(r"\d+\.\d+\.\d+", version) is not None, "VERSION is MAJOR.MINOR.PATCH",
          repr(version))
    # No ACLAIM_* from the suite's environment: --version must answer whatever else is set.
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACLAIM_")}
    for name in programs(args.bin_dir):
        path = os.path.join(args.bin_dir, name)
        if not os.path.exists(path):
            check(False, f"{name} is built", f"no {path}")
            continue
        r = subprocess.run([path, "--version"], capture_output=True, text=True, env=env,
                           timeout=30)
        want = f"{name} {version} (protocol {protocols})\n"
        check(r.returncode == 0 and r.stdout == want and r.stderr == "",
              f"{name} --version: {want.strip()}",
              f"exit {r.returncode}; stdout {r.stdout!r}; stderr {r.stderr[-400:]!r}")

    r = subprocess.run([sys.executable, "-c", "import aclaim; print(aclaim.__version__)"],
                       capture_output=True, text=True, timeout=60,
                       env=dict(env, PYTHONPATH=os.path.join(root, "clients", "python")))
    check(r.returncode == 0 and r.stdout.strip() == version,
          f"the Python client's aclaim.__version__ is {version}",
          f"exit {r.returncode}; stdout {r.stdout!r}; stderr {r.stderr[-400:]!r}")

    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
