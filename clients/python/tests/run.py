#!/usr/bin/env python3
"""Runs the Python client's tests, as the suite (ctest) does:

    tests/run.py unit                                  # no coordinator: test_unit_*.py
    tests/run.py e2e --mode plaintext --bin-dir build/bin   # test_e2e_*.py against real
    tests/run.py e2e --mode curve --bin-dir build/bin       # coordinators and PostgreSQL

The e2e tests need ACLAIM_TEST_DSN (a PostgreSQL server where they may create databases; the
suite's compose/dev test sets it). A new test module is picked up by its name alone; one whose
tests do not depend on the transport marks them @support.plaintext_only so that the CURVE pass
does not repeat them. Exit status 1 when a test failed.
"""

import argparse
import logging
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("suite", choices=["unit", "install", "e2e"])
    p.add_argument("--mode", choices=["plaintext", "curve"], default="plaintext")
    p.add_argument("--bin-dir", help="where aclaim-coordinator and aclaimctl are (e2e)")
    p.add_argument("-k", dest="patterns", action="append", default=[],
                   help="only tests whose name contains this (repeatable)")
    args = p.parse_args()
    if args.suite == "e2e":
        if not args.bin_dir:
            p.error("e2e needs --bin-dir")
        os.environ["ACLAIM_BIN_DIR"] = os.path.abspath(args.bin_dir)
        os.environ["ACLAIM_PY_MODE"] = args.mode
    # The workers' warnings (reconnects, revocations) help read a failure.
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s [%(threadName)s] %(message)s")
    sys.path.insert(0, HERE)
    loader = unittest.TestLoader()
    if args.patterns:
        loader.testNamePatterns = [f"*{k}*" for k in args.patterns]
    pattern = "test_install.py" if args.suite == "install" else f"test_{args.suite}_*.py"
    suite = loader.discover(HERE, pattern=pattern, top_level_dir=HERE)
    if suite.countTestCases() == 0:
        print(f"no tests match {pattern} {args.patterns}", file=sys.stderr)
        return 1
    result = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
