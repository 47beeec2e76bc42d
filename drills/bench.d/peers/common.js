// Shared by the peer drivers of `drills/bench --peers`: arguments, a measured window, and CPU time
// read from /proc the way aclaim-bench reads it (drills/bench.d/cpu.cpp), so that the figures of
// both sides mean the same thing.
'use strict';
const fs = require('fs');
const os = require('os');

/** `node driver.js COMMAND --key value ...` as { command, key: value }. */
function parseArgs(argv) {
  const out = { command: argv[2] };
  for (let i = 3; i < argv.length; i += 2) out[argv[i].replace(/^--/, '')] = argv[i + 1];
  return out;
}

const TICK_US = 1e6 / 100; // USER_HZ is 100 on Linux

/** ppid and CPU ticks (own, and of reaped children) of a process, or null when it is gone. */
function procStat(pid) {
  try {
    const text = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = text.slice(text.lastIndexOf(')') + 2).split(' '); // f[0] is field 3
    return { ppid: Number(f[1]), own: Number(f[11]) + Number(f[12]), children: Number(f[13]) + Number(f[14]) };
  } catch {
    return null;
  }
}

/** The postmaster with its reaped children and every live child, in microseconds. */
function postgresUs(postmaster) {
  const master = postmaster > 0 ? procStat(postmaster) : null;
  if (!master) return 0;
  let ticks = master.own + master.children;
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const s = procStat(name);
    if (s && s.ppid === postmaster) ticks += s.own;
  }
  return ticks * TICK_US;
}

function machineTicks() {
  const v = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1, 9).map(Number);
  const total = v.reduce((a, b) => a + b, 0);
  return { busy: total - v[3] - v[4], total };
}

function sampleCpu(postmaster) {
  const self = process.cpuUsage();
  return { at: process.hrtime.bigint(), self: self.user + self.system, pg: postgresUs(postmaster), ...machineTicks() };
}

/** CPU microseconds per job and each party's share of the machine, as aclaim-bench reports them. */
function cpuReport(a, b, jobs) {
  const wallUs = Number(b.at - a.at) / 1000;
  const cores = os.cpus().length;
  const capacity = wallUs * cores;
  const self = b.self - a.self, pg = b.pg - a.pg;
  const busy = b.total > a.total ? (b.busy - a.busy) / (b.total - a.total) : 0;
  const per = (us) => (jobs > 0 ? us / jobs : 0);
  return {
    worker_us_per_job: per(self),
    postgres_us_per_job: per(pg),
    worker_share: self / capacity,
    postgres_share: pg / capacity,
    machine_busy_share: busy,
    other_share: Math.max(0, busy - (self + pg) / capacity),
    cores,
  };
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Runs `start` (which starts the workers), waits out the warm-up, then counts the jobs `finished`
 * reports over the window and the CPU spent meanwhile; `stop` ends the workers. Prints one JSON line.
 */
async function measureWindow({ args, start, finished, stop, extra }) {
  const warmup = Number(args.warmup || 1), seconds = Number(args.seconds || 8);
  const postmaster = Number(args['pg-pid'] || 0);
  await start();
  await sleep(warmup * 1000);
  const before = await finished();
  const cpuBefore = sampleCpu(postmaster);
  await sleep(seconds * 1000);
  const after = await finished();
  const cpuAfter = sampleCpu(postmaster);
  await stop();
  const elapsed = Number(cpuAfter.at - cpuBefore.at) / 1e9;
  const jobs = after - before;
  console.log(JSON.stringify({ jobs_per_s: jobs / elapsed, jobs_in_window: jobs, cpu: cpuReport(cpuBefore, cpuAfter, jobs), ...extra }));
}

module.exports = { parseArgs, measureWindow, sleep };
