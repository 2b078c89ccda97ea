// The real BullMQ, driven by the Go tests of transport/bullmq:
//
//   node fixture.js add   <redis-url> <queue> '<[{name, data, opts}]>'  prints the job IDs
//   node fixture.js state <redis-url> <queue> <id>...                  prints each job's state
//   node fixture.js work  <redis-url> <queue> <count> <timeout-ms>     a Worker takes count jobs, prints them
//   node fixture.js crash <redis-url> <queue>                          a Worker takes a job and exits (code 7) in it
'use strict';
const { Queue, Worker } = require('bullmq');

function connection(url) {
  const u = new URL(url);
  return { host: u.hostname, port: Number(u.port || 6379), maxRetriesPerRequest: null };
}

async function add(conn, name, jobs) {
  const q = new Queue(name, { connection: conn });
  const ids = [];
  for (const j of jobs) {
    const job = await q.add(j.name, j.data, j.opts || {});
    ids.push(job.id);
  }
  await q.close();
  return ids;
}

async function state(conn, name, ids) {
  const q = new Queue(name, { connection: conn });
  const out = [];
  for (const id of ids) {
    const job = await q.getJob(id);
    if (!job) {
      out.push({ id, state: 'missing' });
      continue;
    }
    out.push({
      id,
      state: await job.getState(),
      failedReason: job.failedReason || '',
      returnvalue: job.returnvalue === undefined ? null : job.returnvalue,
      attemptsStarted: job.attemptsStarted,
      attemptsMade: job.attemptsMade,
    });
  }
  await q.close();
  return out;
}

async function work(conn, name, count, timeoutMs) {
  const got = [];
  let done;
  const finished = new Promise((resolve) => { done = resolve; });
  const w = new Worker(name, async (job) => {
    got.push({ id: job.id, name: job.name, data: job.data });
    if (got.length >= count) done();
    return 'ok';
  }, { connection: conn });
  const timer = setTimeout(done, timeoutMs);
  await finished;
  clearTimeout(timer);
  await w.close();
  return got;
}

// crash leaves the job it takes active, under a one-second lock.
async function crash(conn, name) {
  new Worker(name, async () => { process.exit(7); }, { connection: conn, lockDuration: 1000 });
  await new Promise((resolve) => setTimeout(resolve, 30000));
  throw new Error('no job to crash in');
}

async function main() {
  const [cmd, url, name, ...rest] = process.argv.slice(2);
  const conn = connection(url);
  let out;
  switch (cmd) {
    case 'add': out = await add(conn, name, JSON.parse(rest[0])); break;
    case 'state': out = await state(conn, name, rest); break;
    case 'crash': out = await crash(conn, name); break;
    case 'work': out = await work(conn, name, Number(rest[0]), Number(rest[1])); break;
    default: throw new Error(`unknown command ${cmd}`);
  }
  process.stdout.write(JSON.stringify(out) + '\n');
}

main().then(() => process.exit(0), (err) => { console.error(err); process.exit(1); });
