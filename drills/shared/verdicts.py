#!/usr/bin/env python3
"""Compare what workers were told with what the audit log says happened.

    verdicts.py RESULTS_DIR COMPLETED_CSV

RESULTS_DIR holds the --result-file of every aclaim-worker of one scenario (*.jsonl, one JSON
object per verdict). COMPLETED_CSV is "job_id,generation,worker" for every job_events row of kind
'completed'. A worker must be told the truth both ways:

  - ACCEPTED (replayed or not) for a COMPLETE only when job_events has that completion, with the
    same job, generation and worker: otherwise the worker believes in a result nobody recorded;
  - REJECTED for a COMPLETE only when job_events has no such completion: otherwise the worker
    believes it failed although its result was published. ERROR answers (error:<code>, such as
    outcome_unknown) claim neither and are only counted.

Prints one line of counts, then one line per lie; exits 1 when there is any lie, 2 on bad input.
"""

import csv
import glob
import json
import os
import sys
from collections import Counter


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    results_dir, completed_csv = sys.argv[1], sys.argv[2]
    committed = set()
    with open(completed_csv, newline="") as f:
        for row in csv.reader(f):
            if row:
                committed.add((int(row[0]), int(row[1]), row[2]))

    told = Counter()
    rejected = Counter()
    lies = []
    files = sorted(glob.glob(os.path.join(results_dir, "*.jsonl")))
    for path in files:
        with open(path) as f:
            for number, text in enumerate(f, 1):
                if not text.endswith("\n"):
                    # A worker killed in the middle of a write: the line never reached anyone.
                    continue
                try:
                    line = json.loads(text)
                except json.JSONDecodeError as e:
                    print("%s:%d: not JSON: %s" % (path, number, e), file=sys.stderr)
                    return 2
                if line.get("op") != "complete":
                    told[line.get("op", "?") + "_" + line.get("verdict", "?")] += 1
                    continue
                key = (line["job_id"], line["generation"], line["worker"])
                where = "%s:%d" % (os.path.basename(path), number)
                if line["verdict"] == "accepted":
                    told["accepted_replayed" if line.get("replayed") else "accepted"] += 1
                    if key not in committed:
                        lies.append("%s: worker %s was told ACCEPTED for job %d generation %d, "
                                    "but job_events has no such completion"
                                    % (where, key[2], key[0], key[1]))
                elif line["reason"].startswith("error:"):
                    told[line["reason"]] += 1
                else:
                    rejected[line["reason"]] += 1
                    if key in committed:
                        lies.append("%s: worker %s was told REJECTED (%s) for job %d generation "
                                    "%d, but job_events has that completion"
                                    % (where, key[2], line["reason"], key[0], key[1]))

    counts = " ".join("%s=%d" % kv for kv in sorted(told.items()))
    reasons = ",".join("%s:%d" % kv for kv in sorted(rejected.items())) or "none"
    print("result files %d: %s rejected={%s}" % (len(files), counts or "no verdicts", reasons))
    for lie in lies:
        print("LIE " + lie)
    return 1 if lies else 0


if __name__ == "__main__":
    sys.exit(main())
