#!/usr/bin/python3
"""Compares `aclaimctl recover --json` output with what a drill dataset declares.

    recover_expect.py classification EXPECTED.json ACTUAL.json   dry-run counts, list, expired
    recover_expect.py actions EXPECTED.json ACTUAL.json          --apply's actions by kind
    recover_expect.py no-actions ACTUAL.json                     --apply acted on nothing
    recover_expect.py counts EXPECTED.json SECTION ACTUAL.json   totals against SECTION.counts
    recover_expect.py get EXPECTED.json a.b.c                    prints one declared value

Exits 0 when everything matches; otherwise prints each difference on one line and exits 1.
"""

import json
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def diff(label, want, got, problems):
    if want != got:
        problems.append("%s: expected %s, got %s" % (label, json.dumps(want, sort_keys=True),
                                                     json.dumps(got, sort_keys=True)))


def classification(expected, actual, problems):
    want = expected["dry_run"]
    diff("counts", want["counts"], actual["counts"], problems)
    diff("by_org", want["by_org"], actual["by_org"], problems)
    got = [{k: row[k] for k in ("job_id", "org_id", "reason")} for row in actual["inconsistent"]]
    diff("inconsistent", want["inconsistent"], got, problems)
    diff("expired", want["expired"], actual["expired"], problems)
    diff("orphans", [], actual["orphans"], problems)
    got = [{k: row[k] for k in ("org_id", "queue", "reason")} for row in actual["queues"]]
    diff("queues", want["queues"], got, problems)
    diff("mode", "dry-run", actual["mode"], problems)


def actions(expected, actual, problems):
    got = {}
    for a in actual["actions"]:
        got.setdefault(a["action"], []).append(a["job_id"])
    diff("actions", expected["apply"], got, problems)


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    problems = []
    cmd = argv[1]
    if cmd == "classification":
        classification(load(argv[2]), load(argv[3]), problems)
    elif cmd == "actions":
        actions(load(argv[2]), load(argv[3]), problems)
    elif cmd == "no-actions":
        diff("actions", [], load(argv[2])["actions"], problems)
    elif cmd == "counts":
        diff("counts", load(argv[2])[argv[3]]["counts"], load(argv[4])["counts"], problems)
    elif cmd == "get":
        value = load(argv[2])
        for key in argv[3].split("."):
            value = value[key]
        print(value)
        return 0
    else:
        print("unknown command %r" % cmd, file=sys.stderr)
        return 2
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
