#!/usr/bin/env python3
"""The operator console in a real browser (Debian's chromium, headless, driven over the DevTools
protocol) against a live coordinator and database holding jobs in every state.

On a fresh database of the suite's PostgreSQL (ACLAIM_TEST_DSN): a coordinator, a worker session
that completes, fails, holds and is rejected, two jobs set aside by `aclaimctl recover --apply`,
then aclaim-console with two operators (one of every organization, one scoped to organization 2).
Checks that every page loads without a console error and shows the right counts and events, that
a quarantine release clicked in the page lands in the job's audit log under the operator's name,
that a fan-out/fan-in workflow's view shows each stage's state, reviewer and what it waits for,
as a table and as a graph (an SVG node per job coloured by state, an edge per dependency),
that a POST without the CSRF token is refused with 403, that the scoped operator sees only its
organization, and keeps a PNG of every page in --out.
"""

import argparse
import http.cookiejar
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "support"))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))

import cdp  # noqa: E402
import py_worker  # noqa: E402
from suite import free_port, suite_server  # noqa: E402
from sqlapi_support import with_database  # noqa: E402

PASSWORD = "correct horse battery staple"


class Failure(Exception):
    pass


def check(ok, what):
    if not ok:
        raise Failure(what)
    print("ok:", what)


def psql(dsn, statement):
    env = dict(os.environ, PGOPTIONS="-c client_min_messages=warning")
    out = subprocess.run(["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", dsn, "-c", statement],
                         check=True, stdout=subprocess.PIPE, env=env, text=True)
    return out.stdout.strip()


def parsed(raw, content_type):
    if not content_type.startswith("application/json"):
        return raw.decode("utf-8", errors="replace")
    return json.loads(raw or b"{}")


class Http:
    """A cookie-keeping client of the console's JSON API."""

    def __init__(self, base):
        self.base = base
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))

    def request(self, path, body=None, headers=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, headers=dict(headers or {}))
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with self.opener.open(req, timeout=10) as r:
                return r.status, parsed(r.read(), r.headers.get("Content-Type", "")), r.headers
        except urllib.error.HTTPError as e:
            return e.code, parsed(e.read(), e.headers.get("Content-Type", "")), e.headers


def make_history(dsn, endpoint, bin_dir):
    """Jobs in every state in organization 1 and pending ones in organization 2; returns the ids
    by role."""
    ctl = os.path.join(bin_dir, "aclaimctl")
    subprocess.run([ctl, "--dsn", dsn, "enqueue", "--org", "1", "--count", "7"], check=True,
                   stdout=subprocess.DEVNULL)
    subprocess.run([ctl, "--dsn", dsn, "enqueue", "--org", "2", "--count", "3"], check=True,
                   stdout=subprocess.DEVNULL)
    # The lifecycle's states and queues: two jobs that need a skill the worker below lacks, one
    # scheduled for later, and a poison job of one attempt that ends discarded.
    subprocess.run([ctl, "--dsn", dsn, "enqueue", "--org", "1", "--queue", "electrical",
                    "--new-queue", "--count", "2"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([ctl, "--dsn", dsn, "enqueue", "--org", "1", "--delay", "10m",
                    "follow-up visit"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([ctl, "--dsn", dsn, "enqueue", "--org", "1", "--queue", "poison", "--new-queue",
                    "--max-attempts", "1", "crashes every reviewer"], check=True,
                   stdout=subprocess.DEVNULL)
    p = py_worker.Session(endpoint, 10.0)
    kind, _ = p.call("HELLO", worker_id="reviewer-p", org_id=1, queues=["poison"])
    check(kind == "WELCOME", "a worker serving the poison queue is welcomed")
    kind, reply = p.call("CLAIM", extra_wait_s=2.0, max_jobs=1, wait_ms=2000)
    check(kind == "ASSIGNED", "the poison job is claimed")
    poison = reply["jobs"][0]
    kind, _ = p.call("FAIL", job_id=poison["job_id"], generation=poison["generation"],
                     reason="the reviewer crashed", retryable=True)
    check(kind == "ACCEPTED", "the poison job's retryable failure is accepted")
    check(psql(dsn, f"SELECT state FROM jobs WHERE id = {poison['job_id']}") == "discarded",
          "its only attempt used up, the poison job is discarded")
    electrical = psql(dsn, "SELECT min(id) FROM jobs WHERE queue = 'electrical'")
    s = py_worker.Session(endpoint, 10.0)
    kind, _ = s.call("HELLO", worker_id="reviewer-a", org_id=1)
    check(kind == "WELCOME", "the worker is welcomed")
    jobs = []
    while len(jobs) < 5:
        kind, reply = s.call("CLAIM", extra_wait_s=2.0, max_jobs=5 - len(jobs), wait_ms=2000)
        if kind == "ASSIGNED":
            jobs += reply["jobs"]
    done, failed, held, q1, q2 = jobs
    kind, _ = s.call("COMPLETE", job_id=done["job_id"], generation=done["generation"],
                     result_ref="review:done")
    check(kind == "ACCEPTED", "a completion is accepted")
    kind, _ = s.call("FAIL", job_id=failed["job_id"], generation=failed["generation"],
                     reason="the diff does not apply", retryable=False)
    check(kind == "ACCEPTED", "a failure is accepted")
    kind, _ = s.call("COMPLETE", job_id=done["job_id"], generation=done["generation"] + 1,
                     result_ref="review:stale")
    check(kind == "REJECTED", "a completion with a made-up generation is rejected")
    # Two held rows whose generation the log never granted: recovery sets them aside.
    psql(dsn, "UPDATE jobs SET generation = generation + 5 WHERE id IN "
              f"({q1['job_id']}, {q2['job_id']})")
    # Exit 1: it found inconsistencies, which is what this history is made of.
    recovered = subprocess.run([ctl, "--dsn", dsn, "recover", "--apply", "--by", "browser-test"],
                               stdout=subprocess.PIPE, text=True)
    check(recovered.returncode == 1 and "2 quarantined" in recovered.stdout,
          "recovery quarantines the two contradictory rows")
    # Both sessions are kept open: a session ends with its connection, and the overview counts
    # the two workers of organization 1.
    return {"session": s, "poison_session": p, "done": done["job_id"], "failed": failed["job_id"],
            "held": held["job_id"], "release": q1["job_id"], "keep": q2["job_id"],
            "poison": poison["job_id"], "electrical": int(electrical)}


def make_workflow(dsn, endpoint, bin_dir):
    """A fan-out/fan-in workflow in organization 1: an intake, two inspections that wait for it,
    an approval that waits for both. The intake and the electrical inspection are completed by
    reviewer-w, who holds the plumbing inspection; the approval waits for it. Returns the ids."""
    ctl = os.path.join(bin_dir, "aclaimctl")

    def enqueue(*argv):
        out = subprocess.run([ctl, "--dsn", dsn, "enqueue", "--org", "1", "--ids", "--new-queue",
                              *argv],
                             check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             text=True)
        return int(out.stdout.split()[0])

    intake = enqueue("--queue", "intake", "site visit")
    electrical = enqueue("--queue", "inspect", "--depends-on", str(intake), "electrical")
    plumbing = enqueue("--queue", "inspect", "--depends-on", str(intake), "--on-failure", "run",
                       "plumbing")
    approval = enqueue("--queue", "approval", "--depends-on", f"{electrical},{plumbing}",
                       "approval")
    w = py_worker.Session(endpoint, 10.0)
    kind, _ = w.call("HELLO", worker_id="reviewer-w", org_id=1, queues=["intake", "inspect"])
    check(kind == "WELCOME", "a worker of the workflow's queues is welcomed")
    kind, reply = w.call("CLAIM", extra_wait_s=2.0, max_jobs=3, wait_ms=2000)
    check(kind == "ASSIGNED" and [j["job_id"] for j in reply["jobs"]] == [intake],
          "only the intake is claimable: the inspections wait for it")
    kind, _ = w.call("COMPLETE", job_id=intake, generation=reply["jobs"][0]["generation"],
                     result_ref="review:intake")
    check(kind == "ACCEPTED", "the intake's completion is accepted")
    held = []
    while len(held) < 2:
        kind, reply = w.call("CLAIM", extra_wait_s=2.0, max_jobs=2 - len(held), wait_ms=2000)
        if kind == "ASSIGNED":
            held += reply["jobs"]
    by_id = {j["job_id"]: j for j in held}
    check(sorted(by_id) == [electrical, plumbing], "both inspections are claimable after it")
    kind, _ = w.call("COMPLETE", job_id=electrical, generation=by_id[electrical]["generation"],
                     result_ref="review:electrical")
    check(kind == "ACCEPTED", "the electrical inspection's completion is accepted")
    return {"session": w, "intake": intake, "electrical": electrical, "plumbing": plumbing,
            "approval": approval}


def start(argv, log_path, ready_pattern, timeout_s=30):
    log = open(log_path, "wb")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with open(log_path, encoding="utf-8", errors="replace") as f:
            m = re.search(ready_pattern, f.read())
        if m:
            return proc, m
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    raise Failure(f"{argv[0]} did not become ready; see {log_path}")


def page(browser, name, hash_, out, ready):
    """Goes to a page, waits until it rendered and `ready` holds, checks for console errors and
    keeps a screenshot."""
    before = browser.evaluate("Number(document.body.dataset.renders || 0)")
    browser.evaluate(f"location.hash = {json.dumps(hash_)}")
    browser.wait_for(f"document.body.dataset.page === {json.dumps(hash_.split('/')[1].split('?')[0])}"
                     f" && Number(document.body.dataset.renders) > {before}", name + " rendered")
    browser.wait_for(ready, name + " shows its data")
    errors = browser.errors()
    check(not errors, f"the {name} page loads with no console error {errors}")
    path = browser.screenshot(os.path.join(out, f"console-{name}.png"))
    check(os.path.getsize(path) > 1000, f"a screenshot of the {name} page is kept: {path}")


def run(args, work, dsn):
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    coordinator, _ = start(
        [os.path.join(args.bin_dir, "aclaim-coordinator"), "--dsn", dsn, "--bind", endpoint,
         "--migrate", "--plaintext", "--lease-ms", "60000", "--http-bind", "",
         "--presence-interval-ms", "200",
         "--log-level", "info"],
        os.path.join(work, "coordinator.log"), r"serving on", timeout_s=30)
    console = None
    browser = None
    try:
        ids = make_history(dsn, endpoint, args.bin_dir)
        add = os.path.join(args.bin_dir, "aclaim-console")
        subprocess.run([add, "--dsn", dsn, "operator", "add", "tester"], input=PASSWORD + "\n",
                       text=True, check=True, stdout=subprocess.DEVNULL)
        subprocess.run([add, "--dsn", dsn, "operator", "add", "org2", "--org", "2"],
                       input=PASSWORD + "\n", text=True, check=True, stdout=subprocess.DEVNULL)
        stored = psql(dsn, "SELECT password_hash FROM console_operators WHERE name = 'tester'")
        check(stored.startswith("$argon2id$") and PASSWORD not in stored,
              "operator passwords are stored only as an Argon2id hash")
        reports = os.path.join(work, "reports")
        os.makedirs(os.path.join(reports, "canary"))
        with open(os.path.join(reports, "canary", "report.json"), "w") as f:
            json.dump({"ok": True, "p99_claim_ms": 4.2}, f)
        with open(os.path.join(reports, "canary", "latency.svg"), "w") as f:
            f.write('<svg xmlns="http://www.w3.org/2000/svg" width="200" height="60">'
                    '<rect x="10" y="10" width="120" height="40" fill="#1d4e89"/></svg>')
        console, m = start([add, "--dsn", dsn, "serve", "--listen", "127.0.0.1:0",
                            "--reports", reports],
                           os.path.join(work, "console.log"), r"console: (http://\S+)")
        base = m.group(1).rstrip("/")

        # The HTTP side on its own: headers, sign-in, CSRF and the scoped operator.
        anon = Http(base)
        status, _, headers = anon.request("/")
        csp = headers.get("Content-Security-Policy", "")
        check(status == 200 and "script-src 'self'" in csp and "unsafe-inline" not in csp
              and "frame-ancestors 'none'" in csp, "the CSP allows only the console's own script")
        check(headers.get("X-Frame-Options") == "DENY"
              and headers.get("X-Content-Type-Options") == "nosniff", "frames denied, nosniff")
        check(anon.request("/api/overview")[0] == 401, "the API wants a session")
        check(anon.request("/api/login", {"name": "tester", "password": "wrong"})[0] == 401,
              "a wrong password is refused")
        scoped = Http(base)
        check(scoped.request("/api/login", {"name": "org2", "password": PASSWORD})[0] == 200,
              "the scoped operator signs in")
        _, ov, _ = scoped.request("/api/overview")
        check([o["org_id"] for o in ov["organizations"]] == [2],
              "the scoped operator's overview has only its organization")
        check(scoped.request(f"/api/jobs/{ids['done']}")[0] == 404,
              "the scoped operator cannot read another organization's job")
        _, jobs, _ = scoped.request("/api/jobs?limit=50")
        check({j["org_id"] for j in jobs["jobs"]} == {2} and len(jobs["jobs"]) == 3,
              "the scoped operator's job list has only its organization's three jobs")
        _, session, _ = scoped.request("/api/session")
        status, _, _ = scoped.request(f"/api/quarantine/{ids['keep']}/release",
                                      {"reason": "not mine"}, {"X-CSRF-Token": session["csrf"]})
        check(status == 404, "the scoped operator cannot act on another organization's job")
        status, _, _ = scoped.request(f"/api/jobs/{ids['electrical']}/cancel",
                                      {"reason": "not mine"}, {"X-CSRF-Token": session["csrf"]})
        check(status == 404, "the scoped operator cannot cancel another organization's job")
        status, _, _ = scoped.request("/api/queues/1/electrical/pause",
                                      {"reason": "not mine"}, {"X-CSRF-Token": session["csrf"]})
        check(status == 404, "the scoped operator cannot pause another organization's queue")
        check(psql(dsn, f"SELECT state FROM jobs WHERE id = {ids['electrical']}") == "pending"
              and psql(dsn, "SELECT count(*) FROM job_queues WHERE org_id = 1") == "0",
              "the scoped operator's refused actions changed nothing")

        browser = cdp.Browser()
        browser.navigate(base + "/")
        browser.wait_for("document.body.dataset.page === 'login'", "the sign-in form")
        errors = browser.errors()
        check(not errors, f"the sign-in page loads with no console error {errors}")
        nav_shown = ("[...document.querySelectorAll('#nav a, #logout')]"
                     ".filter((e) => e.getClientRects().length > 0).length")
        check(browser.evaluate(nav_shown) == 0,
              "the sign-in page shows no page links and no sign-out button")
        browser.screenshot(os.path.join(args.out, "console-login.png"))
        browser.evaluate(
            f"document.getElementById('login-name').value = 'tester';"
            f"document.getElementById('login-password').value = {json.dumps(PASSWORD)};"
            "document.getElementById('login-form').requestSubmit(); true")
        browser.wait_for("document.body.dataset.page === 'overview'"
                         " && document.querySelector('.card[data-org=\"1\"]') !== null",
                         "the overview after signing in")

        check(browser.evaluate(nav_shown) == 6,
              "signed in, the five page links and the sign-out button show")
        count = ("(() => { const c = {}; for (const e of document.querySelectorAll("
                 "'.card[data-org=\"1\"] .count')) c[e.dataset.state] ="
                 " e.querySelector('.n').textContent; return c; })()")
        page(browser, "overview", "#/overview", args.out,
             "document.querySelector('.card[data-org=\"2\"]') !== null")
        counts = browser.evaluate(count)
        check(counts == {"pending": "4", "scheduled": "1", "assigned": "1", "completed": "1",
                         "failed": "1", "discarded": "1", "cancelled": "0", "quarantined": "2",
                         "parked": "0", "waiting": "0"},
              f"organization 1's counts by state {counts}")
        browser.wait_for("[...document.querySelectorAll('.card[data-org=\"1\"] .workers b')]"
                         ".map((b) => b.textContent).join() === '2'",
                         "the two workers of organization 1 connected to the coordinator")
        check(browser.evaluate("document.querySelector('.card[data-org=\"2\"] .workers')"
                               ".textContent") == "workers connected: none",
              "no worker of organization 2 is connected")
        queues = browser.evaluate(
            "(() => { const q = {}; for (const r of document.querySelectorAll("
            "'#queues tr[data-org=\"1\"]')) { const c = {};"
            " for (const d of r.querySelectorAll('td[data-state]')) c[d.dataset.state] ="
            " d.textContent; q[r.dataset.queue] = c; } return q; })()")
        nothing_else = {"parked": "0", "waiting": "0"}
        check(queues == {"default": {"pending": "2", "scheduled": "1", "assigned": "1",
                                     "discarded": "0", **nothing_else},
                         "electrical": {"pending": "2", "scheduled": "0", "assigned": "0",
                                        "discarded": "0", **nothing_else},
                         "poison": {"pending": "0", "scheduled": "0", "assigned": "0",
                                    "discarded": "1", **nothing_else}},
              f"organization 1's queues with their counts {queues}")
        org2 = browser.evaluate("document.querySelector('.card[data-org=\"2\"] "
                                ".count[data-state=\"pending\"] .n').textContent")
        check(org2 == "3", "organization 2 has three pending jobs")
        card = browser.evaluate("document.querySelector('.card[data-org=\"1\"]').textContent")
        check("leases out 1" in card and "completed last hour 1" in card,
              "one lease out and one completion in the last hour")
        check(re.search(r"stale_generation|lease_expired|already_terminal", card) is not None,
              "the rejection is counted by reason")
        check(browser.evaluate("document.querySelectorAll('.card[data-org=\"1\"] svg.chart rect')"
                               ".length") == 60, "the completions chart has a bar per minute")
        drain = browser.evaluate(
            "[document.querySelector('#drain-total .time-left')?.textContent,"
            " document.querySelector('.card[data-org=\"2\"] .drain .drain-rate')?.textContent,"
            " document.querySelector('.card[data-org=\"2\"] .drain .time-left')?.textContent,"
            " document.querySelector('#queues tr[data-org=\"1\"][data-queue=\"electrical\"]"
            " td.time-left')?.textContent]")
        check(drain[0] is not None and drain[1:] == ["0.00/s", "—", "—"],
              f"the completion rate and time left, in total, per organization and per queue: "
              f"none completed, no time to tell {drain}")

        # Pause a queue from the overview, then resume it: both in the queue's audit log.
        queue_row = '#queues tr[data-org="1"][data-queue="electrical"]'
        browser.click(queue_row + " input.reason")
        browser.call("Input.insertText", text="inspector training")
        browser.click(queue_row + " button.pause")
        browser.wait_for("document.getElementById('action-result').textContent.includes("
                         "'electrical of organization 1 paused')", "the pause's confirmation")
        browser.wait_for(f"document.querySelector('{queue_row}').classList.contains('paused')",
                         "the paused queue marked in the table")
        check(psql(dsn, "SELECT paused FROM job_queues WHERE org_id = 1 AND queue = 'electrical'")
              == "t", "the queue is paused in the database")
        browser.screenshot(os.path.join(args.out, "console-overview-paused.png"))
        browser.click(queue_row + " input.reason")
        browser.call("Input.insertText", text="training over")
        browser.click(queue_row + " button.resume")
        browser.wait_for(f"!document.querySelector('{queue_row}').classList.contains('paused')",
                         "the resumed queue")
        logged = psql(dsn, "SELECT string_agg(kind || ' ' || actor || ' ' || detail, '; ' ORDER BY id)"
                           " FROM queue_events WHERE org_id = 1 AND queue = 'electrical'")
        check(logged == "paused console:tester inspector training; "
                        "resumed console:tester training over",
              f"pause and resume are in queue_events under the operator's name: {logged!r}")
        errors = browser.errors()
        check(not errors, f"pausing and resuming raised no console error {errors}")

        # The held lease close to its end, as a worker that stopped renewing leaves it.
        psql(dsn, "UPDATE jobs SET lease_expires_at = now() + interval '8 seconds'"
                  f" WHERE id = {ids['held']}")
        page(browser, "leases", "#/leases", args.out,
             f"document.querySelector('#leases tr[data-job=\"{ids['held']}\"]') !== null")
        row = browser.evaluate(f"document.querySelector('#leases tr[data-job=\"{ids['held']}\"]')"
                               ".textContent")
        check("reviewer-a" in row, "the live lease names its holder")
        check(browser.evaluate(f"document.querySelector('#leases tr[data-job=\"{ids['held']}\"]')"
                               ".classList.contains('expiring')"),
              "a lease about to expire is highlighted")
        check(browser.evaluate("document.querySelectorAll('#leases tbody tr').length") == 1,
              "exactly one live lease")
        held = f"#leases tr[data-job=\"{ids['held']}\"]"
        browser.click(held + " input.reason")
        browser.call("Input.insertText", text="worker stopped renewing")
        browser.click(held + " button.release")
        browser.wait_for("document.getElementById('action-result').textContent.includes("
                         "'taken from reviewer-a')", "the take-back's confirmation")
        browser.wait_for(f"document.querySelector('{held}') === null",
                         "the lease leaving the page")
        errors = browser.errors()
        check(not errors, f"taking a lease back raised no console error {errors}")
        logged = psql(dsn, "SELECT kind || ' ' || worker FROM job_events"
                           f" WHERE job_id = {ids['held']} ORDER BY id DESC LIMIT 1")
        check(logged == "released console:tester",
              f"the take-back is in job_events under the operator's name: {logged!r}")

        page(browser, "jobs", "#/jobs?org=1&state=failed", args.out,
             "document.querySelector('#jobs tbody tr') !== null")
        rows = browser.evaluate("[...document.querySelectorAll('#jobs tbody tr')]"
                                ".map((r) => Number(r.dataset.job))")
        check(rows == [ids["failed"]], f"the state filter finds the failed job {rows}")
        page(browser, "jobs-paged", "#/jobs?limit=4", args.out,
             "document.getElementById('next-page') !== null")
        first = browser.evaluate("[...document.querySelectorAll('#jobs tbody tr')]"
                                 ".map((r) => Number(r.dataset.job))")
        browser.click("#next-page")
        browser.wait_for("location.hash.includes('after=')", "the next page")
        browser.wait_for("document.querySelector('#jobs tbody tr') !== null && "
                         f"Number(document.querySelector('#jobs tbody tr').dataset.job) > {first[-1]}",
                         "the second page's rows")
        second = browser.evaluate("[...document.querySelectorAll('#jobs tbody tr')]"
                                  ".map((r) => Number(r.dataset.job))")
        check(len(first) == 4 and min(second) > max(first), "keyset paging moves past the page")

        page(browser, "job", f"#/job/{ids['done']}", args.out,
             "document.querySelector('#timeline li') !== null")
        kinds = browser.evaluate("[...document.querySelectorAll('#timeline li')]"
                                 ".map((l) => l.dataset.kind)")
        check(kinds == ["enqueued", "claimed", "completed", "rejected"],
              f"the completed job's whole audit timeline {kinds}")

        # A workflow's view, from a job's page and by URL; the scoped operator cannot read it.
        wf = make_workflow(dsn, endpoint, args.bin_dir)
        page(browser, "job-intake", f"#/job/{wf['intake']}", args.out,
             "document.getElementById('workflow-link') !== null")
        browser.click("#workflow-link")
        browser.wait_for("document.body.dataset.page === 'workflow' && "
                         "document.querySelectorAll('#workflow tbody tr').length === 4",
                         "the workflow view opened from the job's page")
        page(browser, "workflow", f"#/workflow/{wf['approval']}", args.out,
             "document.querySelectorAll('#workflow tbody tr').length === 4")
        rows = browser.evaluate(
            "[...document.querySelectorAll('#workflow tbody tr')].map((r) => [Number(r.dataset.job),"
            " r.cells[0].textContent, r.dataset.state, r.querySelector('.reviewer').textContent,"
            " r.querySelector('.waits').textContent, r.querySelector('.depends').textContent])")
        e, p = wf["electrical"], wf["plumbing"]
        expected = [
            [wf["intake"], "1", "completed", "reviewer-w", "—", ""],
            [e, "2", "completed", "reviewer-w", "—", f"#{wf['intake']} (cancel: completed)"],
            [p, "2", "assigned", "reviewer-w", "—", f"#{wf['intake']} (run: completed)"],
            [wf["approval"], "3", "waiting", "—", f"#{p}",
             f"#{e} (cancel: completed), #{p} (cancel)"],
        ]
        check(rows == expected, f"the workflow view shows each stage, reviewer and wait {rows}")
        check(browser.evaluate("document.querySelector('#workflow tr.asked').dataset.job")
              == str(wf["approval"]), "the job asked for is marked")
        # Beside the table, the same workflow drawn as a graph by the console's own script.
        graph = browser.evaluate(
            "(() => { const g = document.querySelector('.workflow-views svg#workflow-graph');"
            " if (!g) return null;"
            " return { nodes: [...g.querySelectorAll('g.node')].map((n) => [Number(n.dataset.job),"
            " n.dataset.state, n.querySelector('rect').getAttribute('fill'),"
            " n.transform.baseVal.consolidate().matrix.e]),"
            " edges: [...g.querySelectorAll('path.edge')].map((p) => [Number(p.dataset.from),"
            " Number(p.dataset.to)]) }; })()")
        check(graph is not None, "the workflow view draws the workflow as an SVG graph")
        nodes = {n[0]: {"state": n[1], "fill": n[2], "x": n[3]} for n in graph["nodes"]}
        check(len(graph["nodes"]) == 4 and sorted(nodes) == sorted(
            [wf["intake"], e, p, wf["approval"]]), f"one node per job {graph['nodes']}")
        check(sorted(map(tuple, graph["edges"])) == sorted(
            [(wf["intake"], e), (wf["intake"], p), (e, wf["approval"]), (p, wf["approval"])]),
              f"one edge per dependency, from the job depended on {graph['edges']}")
        check(all(nodes[j]["state"] == r[2] for j, r in zip([r[0] for r in expected], expected)),
              "each node carries its job's state")
        check(nodes[wf["intake"]]["x"] < nodes[e]["x"] == nodes[p]["x"] < nodes[wf["approval"]]["x"],
              f"the stages are columns, left to right {nodes}")
        fills = {n["state"]: n["fill"] for n in nodes.values()}
        check(nodes[wf["intake"]]["fill"] == nodes[e]["fill"]
              and len(set(fills.values())) == 3,
              f"the nodes are coloured by state, one colour each {fills}")
        check(scoped.request(f"/api/jobs/{wf['approval']}/workflow")[0] == 404, "the scoped operator cannot read another organization's workflow")
        page(browser, "job-approval", f"#/job/{wf['approval']}", args.out,
             "document.querySelector('#timeline li[data-kind=\"waiting\"]') !== null")
        waited = browser.evaluate(
            "document.querySelector('#timeline li[data-kind=\"waiting\"]').textContent")
        check(f"waits for 2 jobs: {e} (cancel), {p} (cancel)" in waited,
              f"the approval's audit timeline says what it waits for: {waited!r}")

        page(browser, "jobs-queue", "#/jobs?org=1&queue=electrical", args.out,
             "document.querySelector('#jobs tbody tr') !== null")
        rows = browser.evaluate("[...document.querySelectorAll('#jobs tbody tr')]"
                                ".map((r) => Number(r.dataset.job))")
        check(rows == [ids["electrical"], ids["electrical"] + 1],
              f"the queue filter finds the electrical jobs {rows}")

        # Cancel a pending job from its page; retry the discarded one from its page.
        page(browser, "job-cancel", f"#/job/{ids['electrical']}", args.out,
             "document.getElementById('job-cancel') !== null")
        browser.click(".job-actions input.reason")
        browser.call("Input.insertText", text="order withdrawn")
        browser.click("#job-cancel")
        browser.wait_for("document.querySelector('#timeline li[data-kind=\"cancelled\"]') !== null",
                         "the cancellation in the job's timeline")
        check("cancelled" in browser.evaluate("document.getElementById('action-result').textContent"),
              "the page confirms the cancellation")
        logged = psql(dsn, "SELECT state || ' ' || (SELECT kind || ' ' || worker FROM job_events e"
                           f" WHERE e.job_id = j.id ORDER BY id DESC LIMIT 1) FROM jobs j"
                           f" WHERE id = {ids['electrical']}")
        check(logged == "cancelled cancelled console:tester",
              f"the job is cancelled, audited under the operator's name: {logged!r}")
        browser.screenshot(os.path.join(args.out, "console-job-cancelled.png"))
        page(browser, "job-retry", f"#/job/{ids['poison']}", args.out,
             "document.getElementById('job-retry') !== null")
        timeline = browser.evaluate("[...document.querySelectorAll('#timeline li')]"
                                    ".map((l) => l.dataset.kind)")
        check(timeline == ["enqueued", "claimed", "discarded"],
              f"the discarded job's timeline shows its attempt and the discard {timeline}")
        browser.click(".job-actions input.reason")
        browser.call("Input.insertText", text="scanner fixed")
        browser.click("#job-retry")
        browser.wait_for("document.querySelector('#timeline li[data-kind=\"retried\"]') !== null",
                         "the retry in the job's timeline")
        check(psql(dsn, f"SELECT state || ' ' || attempts FROM jobs WHERE id = {ids['poison']}")
              == "pending 0", "the retried job is pending with a fresh attempt budget")
        # Read before the forged request below, whose refusal the browser logs as an error.
        errors = browser.errors()
        check(not errors, f"cancelling and retrying raised no console error {errors}")

        # Separation of duties: a job that every connected reviewer of its queue is excluded from
        # waits, and its page says why (reviewer-w of the workflow above, serving "inspect", is
        # still connected; reviewer-a and reviewer-p serve other queues and do not count).
        out = subprocess.run([os.path.join(args.bin_dir, "aclaimctl"), "--dsn", dsn, "enqueue",
                              "--org", "1", "--queue", "inspect", "--ids",
                              "--exclude-keys", "reviewer-a,reviewer-p,reviewer-w",
                              "second look"],
                             check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             text=True)
        excluded = int(out.stdout.split()[-1])
        # The coordinator publishes its connected reviewers every presence interval: the page is
        # read once the row it reads names reviewer-w (bounded; the check below says if not).
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and psql(
                dsn, "SELECT count(*) FROM coordinator_presence "
                     "WHERE org_id = 1 AND 'reviewer-w' = ANY(reviewers)") == "0":
            time.sleep(0.1)
        page(browser, "job-excluded", f"#/job/{excluded}", args.out,
             "document.getElementById('waits-because') !== null")
        check(browser.evaluate("document.getElementById('excluded').textContent")
              == "reviewer-a, reviewer-p, reviewer-w",
              "the job's page lists the reviewers it excludes")
        why = browser.evaluate("document.getElementById('waits-because').textContent")
        check(why == "every connected reviewer of queue inspect (reviewer-w) is excluded "
                     "from this job",
              f"the job's page says why it waits: {why!r}")
        forged = f"/api/jobs/{ids['done']}/cancel"
        status = browser.evaluate(
            f"fetch('{forged}', {{method: 'POST', headers:"
            " {'Content-Type': 'application/json'}, body: JSON.stringify({reason: 'forged'})})"
            ".then((r) => r.status)")
        check(status == 403, "a cancel without the CSRF token is refused with 403")
        errors = [e for e in browser.errors() if forged not in e]
        check(not errors, f"the refused cancel raised no console error but its own {errors}")

        page(browser, "quarantine", "#/quarantine", args.out,
             f"document.querySelector('#quarantine tr[data-job=\"{ids['release']}\"]') !== null")
        check(browser.evaluate("document.querySelectorAll('#quarantine tbody tr').length") == 2,
              "the inbox holds the two quarantined jobs")
        evidence = browser.evaluate(f"document.querySelector('#quarantine tr[data-job="
                                    f"\"{ids['release']}\"]').textContent")
        check("claim_missing_from_log" in evidence, "the inbox shows the recovery evidence")

        # A POST from the signed-in page without the token: refused, nothing changes.
        status = browser.evaluate(
            f"fetch('/api/quarantine/{ids['keep']}/fail', {{method: 'POST', headers:"
            " {'Content-Type': 'application/json'}, body: JSON.stringify({reason: 'forged'})})"
            ".then((r) => r.status)")
        check(status == 403, "a POST without the CSRF token is refused with 403")
        browser.errors()  # the refused fetch is logged by the browser, as it should be
        check(psql(dsn, f"SELECT state FROM jobs WHERE id = {ids['keep']}") == "quarantined",
              "the refused POST changed nothing")

        selector = f"#quarantine tr[data-job=\"{ids['release']}\"]"
        browser.click(selector + " input.reason")
        browser.call("Input.insertText", text="evidence reviewed; the generation bump was a test")
        browser.click(selector + " button.release")
        browser.wait_for("document.getElementById('action-result').textContent.includes('pending')",
                         "the release's confirmation")
        browser.wait_for(f"document.querySelector('{selector}') === null",
                         "the released job leaving the inbox")
        errors = browser.errors()
        check(not errors, f"the release raised no console error {errors}")
        browser.screenshot(os.path.join(args.out, "console-quarantine-released.png"))
        logged = psql(dsn, "SELECT kind || ' ' || worker || ' ' || detail FROM job_events"
                           f" WHERE job_id = {ids['release']} ORDER BY id DESC LIMIT 1")
        check(logged.startswith("unquarantined console:tester")
              and "evidence reviewed" in logged,
              f"the release is in job_events under the operator's name: {logged!r}")
        page(browser, "job-released", f"#/job/{ids['release']}", args.out,
             "document.querySelector('#timeline li[data-kind=\"unquarantined\"]') !== null")
        check("console:tester" in browser.evaluate(
            "document.querySelector('#timeline li[data-kind=\"unquarantined\"]').textContent"),
            "the job's timeline in the page shows the release by the operator")

        page(browser, "drills", "#/drills", args.out,
             "document.querySelector('[data-report=\"canary/latency.svg\"] img') !== null")
        browser.click("#run-check")
        browser.wait_for("document.getElementById('check-result').textContent.startsWith('OK')",
                         "the check's result")
        errors = browser.errors()
        check(not errors, f"running the check raised no console error {errors}")
        browser.screenshot(os.path.join(args.out, "console-drills.png"))
        return 0
    finally:
        if browser:
            browser.close()
        for proc in (console, coordinator):
            if proc and proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bin-dir", required=True)
    p.add_argument("--out", required=True, help="where the screenshots go")
    args = p.parse_args()
    server = suite_server()
    if not server:
        return 1
    os.makedirs(args.out, exist_ok=True)
    name = f"aclaim_console_{os.getpid()}"
    psql(server, f"CREATE DATABASE {name}")
    work = tempfile.mkdtemp(prefix="aclaim-console-")
    status = 1
    started = time.monotonic()
    try:
        status = run(args, work, with_database(server, name))
    except (Failure, cdp.CdpError, subprocess.CalledProcessError, OSError, ValueError) as e:
        print("FAILED:", e, file=sys.stderr)
        for log in ("coordinator.log", "console.log"):
            path = os.path.join(work, log)
            if os.path.exists(path):
                with open(path, encoding="utf-8", errors="replace") as f:
                    print(f"---- {log} (tail) ----\n" + "".join(f.readlines()[-30:]),
                          file=sys.stderr)
    finally:
        psql(server, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    print(f"console browser test: {'passed' if status == 0 else 'FAILED'} in "
          f"{time.monotonic() - started:.1f} s; screenshots in {args.out}")
    return status


if __name__ == "__main__":
    sys.exit(main())
