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

import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))

from suite import Checks, arguments, checkout_version  # noqa: E402

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
    args = arguments(__doc__, "--bin-dir", root="the checkout (VERSION, docs/, clients/python)")
    root = os.path.abspath(args.root)
    version = checkout_version(root)
    with open(os.path.join(root, "docs", "protocol.md")) as f:
        title = f.readline()
    newest = re.search(r"version (\d+\.\d+)", title)
    protocols = f"1.0-{newest.group(1)}" if newest else "?"
    print(f"VERSION {version}, protocol {protocols} (docs/protocol.md: {title.strip()!r})")

    c = Checks()
    check = c.check
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

    return c.result()


if __name__ == "__main__":
    sys.exit(main())
