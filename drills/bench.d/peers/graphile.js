// graphile-worker on the bench's PostgreSQL, for `drills/bench --peers` (installed by npm into a
// scratch folder at run time, never committed).
//   node graphile.js setup --dsn DSN --jobs N
//   node graphile.js run --dsn DSN --mode single|batched --concurrency C [--seconds S] [--warmup W] [--pg-pid P]
// single: every worker fetches one job per query and completes it with one query, graphile-worker's
// default. batched: a local queue of 200 jobs fetched per query and completions batched
// (completeJobBatchDelay 0), its documented high-throughput setting. Tasks are no-ops. Counts
// completed jobs as the rows the worker deleted (graphile-worker deletes a job when it completes).
'use strict';
const { Pool } = require('pg');
const { parseArgs, measureWindow } = require('./common');

const JOBS = 'graphile_worker._private_jobs';

async function setup(args) {
  const { runMigrations } = await import('graphile-worker');
  const pool = new Pool({ connectionString: args.dsn, max: 2 });
  pool.on('error', (e) => console.error(`graphile driver: pool: ${e.message}`));
  await runMigrations({ pgPool: pool });
  await pool.query(`TRUNCATE ${JOBS}, graphile_worker._private_job_queues`);
  const total = Number(args.jobs);
  for (let done = 0; done < total; done += 20000) {
    await pool.query(
      `SELECT count(*) FROM graphile_worker.add_jobs(array(
         SELECT ROW('noop', '{}'::json, NULL, NULL, NULL, NULL, NULL, NULL)::graphile_worker.job_spec
           FROM generate_series(1, $1::int)))`,
      [Math.min(20000, total - done)]);
  }
  await pool.query(`VACUUM ANALYZE ${JOBS}`);
  await pool.end();
}

async function run(args) {
  const { run: runWorker, Logger } = await import('graphile-worker');
  const concurrency = Number(args.concurrency);
  const batched = args.mode === 'batched';
  const pool = new Pool({ connectionString: args.dsn, max: concurrency + 4 });
  pool.on('error', (e) => console.error(`graphile driver: pool: ${e.message}`));
  const remaining = async () => Number((await pool.query(`SELECT count(*) FROM ${JOBS}`)).rows[0].count);
  const total = await remaining();
  let runner;
  await measureWindow({
    args,
    start: async () => {
      runner = await runWorker({
        pgPool: pool,
        noHandleSignals: true,
        taskList: { noop: async () => {} },
        logger: new Logger(() => (level, message) => { if (level === 'error') console.error(message); }),
        preset: {
          worker: {
            concurrentJobs: concurrency,
            pollInterval: 1000,
            maxPoolSize: concurrency + 4,
            ...(batched ? { localQueue: { size: 200 }, completeJobBatchDelay: 0 } : {}),
          },
        },
      });
    },
    finished: async () => total - (await remaining()),
    stop: async () => { await runner.stop(); await pool.end(); },
    extra: { mode: args.mode, concurrency, local_queue: batched ? 200 : 0 },
  });
}

const args = parseArgs(process.argv);
(args.command === 'setup' ? setup(args) : run(args)).catch((e) => {
  console.error(`graphile driver: ${e.stack || e}`);
  process.exit(1);
});
