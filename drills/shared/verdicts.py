#!/usr/bin/env python3
"""Compare what workers were told with what the audit log says happened.

    verdicts.py RESULTS_DIR COMPLETED_CSV [--max-unheard N]

RESULTS_DIR holds the --result-file of every aclaim-worker of one scenario (*.jsonl, one JSON
object per verdict). COMPLETED_CSV is "job_id,generation,worker" for every job_events row of kind
'completed'. A worker must be told the truth both ways:

  - ACCEPTED (replayed or not) for a COMPLETE only when job_events has that completion, with the
    same job, generation and worker: otherwise the worker believes in a result nobody recorded;
  - REJECTED for a COMPLETE only when job_events has no such completion: otherwise the worker
    believes it failed although its result was published. ERROR answers (error:<code>, such as
    outcome_unknown) claim neither and are only counted.

Silence is no proof: with no verdict to compare, every check above would pass. So the files must
also account for job_events. Every worker with a completion in job_events must have a result
file, and must have heard ACCEPTED for all of its completions but at most N (--max-unheard,
default 8: the most a worker has in flight in any drill, which a SIGKILL between a commit and its
reply can leave unheard, docs/guarantees.md "Delivery of the verdict"). No result file at all is
a failure too. A worker that stopped writing verdicts, or an emptied result folder, fails here.

Prints one line of counts, then one line per lie or missing verdict; exits 1 when there is any,
2 on bad input.
"""

import csv
import glob
import json
import os
import sys
from collections import Counter


def main():
    args = sys.argv[1:]
    max_unheard = 8
    if len(args) == 4 and args[2] == "--max-unheard" and args[3].isdigit():
        max_unheard = int(args[3])
        args = args[:2]
    if len(args) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    results_dir, completed_csv = args
    committed = set()
    with open(completed_csv, newline="") as f:
        for row in csv.reader(f):
            if row:
                committed.add((int(row[0]), int(row[1]), row[2]))
    completions_of = Counter(worker for _, _, worker in committed)
    heard = set()

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
                    if key in committed:
                        heard.add(key)
                    else:
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

    # A replayed ACCEPTED may repeat one the worker heard before: each completion counts once.
    heard_by = Counter(worker for _, _, worker in heard)
    missing = []
    if not files:
        missing.append("no result file in %s: nothing the workers were told can be compared"
                       % results_dir)
    have_file = {os.path.basename(p)[:-len(".jsonl")] for p in files}
    for worker, n in sorted(completions_of.items()):
        if worker not in have_file:
            missing.append("worker %s has %d completions in job_events but no result file"
                           % (worker, n))
        elif n - heard_by[worker] > max_unheard:
            missing.append("worker %s heard ACCEPTED for %d of its %d completions in job_events "
                           "(at most %d may go unheard)" % (worker, heard_by[worker], n, max_unheard))

    counts = " ".join("%s=%d" % kv for kv in sorted(told.items()))
    reasons = ",".join("%s:%d" % kv for kv in sorted(rejected.items())) or "none"
    print("result files %d: %s rejected={%s}" % (len(files), counts or "no verdicts", reasons))
    for lie in lies:
        print("LIE " + lie)
    for line in missing:
        print("UNHEARD " + line)
    return 1 if lies or missing else 0


if __name__ == "__main__":
    sys.exit(main())
