// lancedb.mjs: the LanceDB peer of sluice's benchmark harness (go run ./bench).
//
//   node lancedb.mjs --prepare --arrow FILE --db DIR [--table data]
//   node lancedb.mjs --scenario sequential --db DIR --columns id,label,x,s [--batch-size 1024]
//   node lancedb.mjs --scenario shuffled --db DIR --columns id,label,x,s [--batch-size 1024]
//                    [--seed 42] [--clump-size 1] [--prefetch 2] [--max-seconds S]
//                    [--perm-memory-bytes 1073741824] [--mixing-rows N]
//   node lancedb.mjs --scenario take --db DIR --columns id,label,x,s [--positions 1024]
//                    [--requests 100] [--seed 42]
//
// --prepare writes the rows of an Arrow IPC file (the harness exports the
// Parquet dataset to one) as the Lance table, replacing any table of that
// name. The other modes read that table. Each mode prints ONE JSON line with
// rows, seconds and rows_per_s; only the read is timed (or the write, for
// --prepare), never loading the module or opening the database.
//
// sequential: table.query().select(columns), executed as a stream of Arrow
// record batches of at most --batch-size rows; every column of every batch
// is opened.
//
// shuffled: permutationBuilder(table).shuffle({seed, clumpSize}).execute()
// makes the permutation (a table of row ids in shuffled order); its row ids
// are read in order, cut into batches of --batch-size, and each batch is
// fetched with table.takeRowIds(ids).select(columns), --prefetch takes in
// flight and taken in order. The time covers building the permutation and
// the takes. With --max-seconds, the takes stop after that long and the line
// says how much of the epoch was read (complete false); rows_per_s is then
// the epoch's rate projected from the measured take rate:
// epoch_rows / (permutation_seconds + epoch_rows / take_rows_per_s).
// With --mixing-rows N (the table's rows), it also reports mixing as the
// Go harness measures it (bench/mixing.go): the mean, over the batches
// taken, of the total variation distance between the batch's histogram of
// id*10/N (the label of row id on label-sorted data of the same shape) and
// the uniform one.
//
// take: random access. The table's row ids are listed first (untimed, with
// permutationBuilder(table).execute(), unshuffled); then --requests requests
// each take --positions distinct ids drawn uniformly (seeded) with
// table.takeRowIds(ids).select(columns).toArrow(), one request at a time,
// as a map-style dataset's __getitems__ would. rows_per_s is the rows taken
// over the time of the takes.
//
// On failure it prints {"peer":"lancedb","error":"..."} and exits with 1.
import { parseArgs } from 'node:util';
import { readFileSync } from 'node:fs';
import * as lancedb from '@lancedb/lancedb';
import { tableFromIPC } from 'apache-arrow';

// version is the version of an installed package, read from its
// package.json beside this script (the packages do not all export it).
const version = (name) =>
  JSON.parse(readFileSync(new URL(`./node_modules/${name}/package.json`, import.meta.url))).version;

function fail(err) {
  console.log(JSON.stringify({ peer: 'lancedb', error: String(err?.stack ?? err) }));
  process.exit(1);
}

const now = () => performance.now() / 1000;

function positiveInt(name, s) {
  const n = Number(s);
  if (!Number.isInteger(n) || n <= 0) throw new Error(`--${name} ${s}: want a positive integer`);
  return n;
}

// touch opens every column of a batch and reads its first value, so that no
// column is left undecoded.
function touch(batch, columns) {
  if (batch.numCols !== columns.length) {
    throw new Error(`batch has ${batch.numCols} columns, want ${columns.length}`);
  }
  for (let c = 0; c < batch.numCols; c++) {
    const col = batch.getChildAt(c);
    if (col.length !== batch.numRows) throw new Error(`column ${columns[c]}: ${col.length} values in a batch of ${batch.numRows} rows`);
    if (batch.numRows > 0) col.get(0);
  }
}

async function prepare(db, opt) {
  if (!opt.arrow) throw new Error('--prepare needs --arrow FILE');
  const data = tableFromIPC(readFileSync(opt.arrow));
  const start = now();
  const table = await db.createTable(opt.table, data, { mode: 'overwrite' });
  const seconds = now() - start;
  const rows = await table.countRows();
  if (rows !== data.numRows) throw new Error(`wrote ${rows} rows of ${data.numRows}`);
  return { scenario: 'write', rows, seconds, rows_per_s: rows / seconds };
}

async function sequential(table, columns, batchSize) {
  const start = now();
  let rows = 0;
  let batches = 0;
  // execute() is the streaming form of the query (toArrow() collects the
  // whole result first); its .d.ts marks it protected, the JavaScript
  // exposes it.
  for await (const batch of table.query().select(columns).execute({ maxBatchLength: batchSize })) {
    touch(batch, columns);
    rows += batch.numRows;
    batches++;
  }
  const seconds = now() - start;
  return { scenario: 'sequential', rows, seconds, rows_per_s: rows / seconds, batches };
}

async function shuffled(table, columns, opt) {
  const batchSize = positiveInt('batch-size', opt['batch-size']);
  const seed = Number(opt.seed);
  const clumpSize = positiveInt('clump-size', opt['clump-size']);
  const prefetch = positiveInt('prefetch', opt.prefetch);
  const maxSeconds = opt['max-seconds'] ? Number(opt['max-seconds']) : Infinity;
  // The permutation builder sorts the row ids in a memory pool of 100 MB by
  // default, too small past about 3M rows ("Not enough memory to continue
  // external sort"); the native code reads this variable (found in the
  // binary, not documented in the .d.ts) when it builds.
  process.env.LANCEDB_PERM_BUILDER_MEMORY_LIMIT ??= String(positiveInt('perm-memory-bytes', opt['perm-memory-bytes']));

  const start = now();
  const perm = await lancedb.permutationBuilder(table).shuffle({ seed, clumpSize }).execute();
  const permSeconds = now() - start;
  const epochRows = await perm.countRows();

  const mixingRows = opt['mixing-rows'] ? positiveInt('mixing-rows', opt['mixing-rows']) : 0;
  if (mixingRows > 0 && !columns.includes('id')) throw new Error('--mixing-rows needs the id column among --columns');
  let mixingSum = 0;
  const fetchStart = now();
  let rows = 0;
  let batches = 0;
  const inFlight = []; // [promise of the taken rows, rows asked for]
  const takeOne = async () => {
    const [pending, want] = inFlight.shift();
    const got = await pending;
    if (got.numRows !== want) throw new Error(`takeRowIds returned ${got.numRows} rows for ${want} ids`);
    for (const batch of got.batches) touch(batch, columns);
    if (mixingRows > 0) mixingSum += mixing(got, mixingRows);
    rows += got.numRows;
    batches++;
  };
  const take = (ids) => {
    inFlight.push([table.takeRowIds(ids).select(columns).toArrow(), ids.length]);
  };
  let ids = [];
  let stopped = false;
  for await (const batch of perm.query().select(['row_id']).execute({ maxBatchLength: batchSize })) {
    for (const id of batch.getChild('row_id').toArray()) {
      ids.push(id);
      if (ids.length === batchSize) {
        take(ids);
        ids = [];
        if (inFlight.length >= prefetch) await takeOne();
      }
    }
    if (now() - fetchStart >= maxSeconds) {
      stopped = true;
      break;
    }
  }
  if (!stopped && ids.length > 0) take(ids);
  while (inFlight.length > 0) await takeOne();
  const fetchSeconds = now() - fetchStart;
  const complete = rows === epochRows;
  const takeRate = rows / fetchSeconds;
  const seconds = permSeconds + fetchSeconds;
  return {
    scenario: 'shuffled',
    rows,
    seconds,
    rows_per_s: complete ? rows / seconds : epochRows / (permSeconds + epochRows / takeRate),
    rows_per_s_basis: complete ? 'the whole epoch' : 'projected epoch: permutation_seconds + epoch_rows at take_rows_per_s',
    complete,
    epoch_rows: epochRows,
    batches,
    permutation_seconds: permSeconds,
    fetch_seconds: fetchSeconds,
    take_rows_per_s: takeRate,
    seed,
    clump_size: clumpSize,
    prefetch,
    take: 'takeRowIds',
    perm_builder_memory_limit: Number(process.env.LANCEDB_PERM_BUILDER_MEMORY_LIMIT),
    ...(mixingRows > 0 && batches > 0 ? { mixing: mixingSum / batches, mixing_batches: batches } : {}),
  };
}

// mixing is the total variation distance between the histogram of the
// labels id*10/rows of a taken batch (a table of record batches) and the
// uniform one.
function mixing(got, rows) {
  const hist = new Array(10).fill(0);
  for (const batch of got.batches) {
    for (const id of batch.getChild('id').toArray()) {
      hist[Math.min(9, Math.max(0, Math.floor((Number(id) * 10) / rows)))]++;
    }
  }
  let d = 0;
  for (const c of hist) d += Math.abs(c / got.numRows - 0.1);
  return d / 2;
}

// mulberry32: a small seeded generator, so that runs draw the same ids.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

async function take(table, columns, opt) {
  const positions = positiveInt('positions', opt.positions);
  const requests = positiveInt('requests', opt.requests);
  const random = rng(Number(opt.seed));
  const perm = await lancedb.permutationBuilder(table).execute();
  const all = [];
  for await (const batch of perm.query().select(['row_id']).execute({ maxBatchLength: 65536 })) {
    for (const id of batch.getChild('row_id').toArray()) all.push(id);
  }
  if (all.length === 0) throw new Error('the table has no rows');
  const start = now();
  let rows = 0;
  for (let r = 0; r < requests; r++) {
    // Distinct ids: takeRowIds returns a row once however often it is asked.
    const picked = new Set();
    while (picked.size < Math.min(positions, all.length)) picked.add(Math.floor(random() * all.length));
    const ids = [...picked].map((i) => all[i]);
    const got = await table.takeRowIds(ids).select(columns).toArrow();
    if (got.numRows !== positions) throw new Error(`takeRowIds returned ${got.numRows} rows for ${positions} ids`);
    for (const batch of got.batches) touch(batch, columns);
    rows += got.numRows;
  }
  const seconds = now() - start;
  return { scenario: 'take', rows, seconds, rows_per_s: rows / seconds, requests, positions, table_rows: all.length, take: 'takeRowIds' };
}

async function main() {
  const { values: opt } = parseArgs({
    options: {
      prepare: { type: 'boolean', default: false },
      arrow: { type: 'string' },
      db: { type: 'string' },
      table: { type: 'string', default: 'data' },
      scenario: { type: 'string' },
      columns: { type: 'string' },
      'batch-size': { type: 'string', default: '1024' },
      seed: { type: 'string', default: '42' },
      'clump-size': { type: 'string', default: '1' },
      prefetch: { type: 'string', default: '2' },
      'max-seconds': { type: 'string' },
      'perm-memory-bytes': { type: 'string', default: String(1 << 30) },
      'mixing-rows': { type: 'string' },
      positions: { type: 'string', default: '1024' },
      requests: { type: 'string', default: '100' },
    },
  });
  if (!opt.db) throw new Error('--db DIR is required');
  const db = await lancedb.connect(opt.db);
  let out;
  if (opt.prepare) {
    out = await prepare(db, opt);
  } else {
    if (!opt.columns) throw new Error('--columns is required');
    const columns = opt.columns.split(',').filter((c) => c !== '');
    const table = await db.openTable(opt.table);
    switch (opt.scenario) {
      case 'sequential':
        out = await sequential(table, columns, positiveInt('batch-size', opt['batch-size']));
        break;
      case 'shuffled':
        out = await shuffled(table, columns, opt);
        break;
      case 'take':
        out = await take(table, columns, opt);
        break;
      default:
        throw new Error(`--scenario ${opt.scenario}: want sequential, shuffled or take`);
    }
  }
  console.log(JSON.stringify({
    peer: 'lancedb',
    ...out,
    lancedb_version: version('@lancedb/lancedb'),
    apache_arrow_version: version('apache-arrow'),
  }));
}

main().catch(fail);
