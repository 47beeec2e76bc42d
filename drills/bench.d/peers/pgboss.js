// pg-boss on the bench's PostgreSQL, for `drills/bench --peers` (installed by npm into a scratch
// folder at run time, never committed).
//   node pgboss.js setup --dsn DSN --jobs N
//   node pgboss.js run --dsn DSN --workers W --batch B [--seconds S] [--warmup W] [--pg-pid P]
// W workers on one queue, each fetching up to B jobs per query at pg-boss's shortest polling
// interval (0.5 s; a worker that finds jobs fetches again at once only when its batch took longer
// than that), completing each batch with one query. Tasks are no-ops. Counts completed jobs as
// the queue's rows in state 'completed'.
'use strict';
const { parseArgs, measureWindow } = require('./common');

const QUEUE = 'bench';

async function boss(args, max) {
  const { default: PgBoss } = await import('pg-boss');
  const b = new PgBoss({ connectionString: args.dsn, max, supervise: false, schedule: false });
  b.on('error', (e) => console.error(`pg-boss: ${e.message}`));
  await b.start();
  return b;
}

async function setup(args) {
  const b = await boss(args, 2);
  await b.deleteQueue(QUEUE).catch(() => {});
  await b.createQueue(QUEUE);
  const total = Number(args.jobs);
  for (let done = 0; done < total; done += 10000) {
    const n = Math.min(10000, total - done);
    await b.insert(Array.from({ length: n }, () => ({ name: QUEUE, data: {} })));
  }
  await b.getDb().executeSql('VACUUM ANALYZE pgboss.job');
  await b.stop({ graceful: false, wait: true });
}

async function run(args) {
  const workers = Number(args.workers), batchSize = Number(args.batch);
  const b = await boss(args, workers + 4);
  const db = b.getDb();
  const completed = async () =>
    Number((await db.executeSql(`SELECT count(*) FROM pgboss.job WHERE name = $1 AND state = 'completed'`, [QUEUE])).rows[0].count);
  await measureWindow({
    args,
    start: async () => {
      for (let i = 0; i < workers; ++i) {
        await b.work(QUEUE, { batchSize, pollingIntervalSeconds: 0.5 }, async () => {});
      }
    },
    finished: completed,
    stop: async () => { await b.stop({ graceful: true, wait: true, timeout: 5000 }); },
    extra: { workers, batch: batchSize, polling_interval_s: 0.5 },
  });
}

const args = parseArgs(process.argv);
(args.command === 'setup' ? setup(args) : run(args)).then(() => process.exit(0), (e) => {
  console.error(`pg-boss driver: ${e.stack || e}`);
  process.exit(1);
});
