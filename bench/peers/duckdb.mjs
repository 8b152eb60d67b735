// duckdb.mjs: the DuckDB peer of sluice's benchmark harness (go run ./bench).
//
//   node duckdb.mjs --data DIR --columns id,label,x,s [--batch-size 1024] [--threads N]
//
// Streams the selected columns of every row of read_parquet('DIR/*.parquet')
// through DuckDB's streaming result API (connection.stream, then fetchChunk
// until the end), opening every column vector of every chunk so that nothing
// is skipped, and prints ONE JSON line: rows, seconds, rows_per_s and what
// DuckDB used. The time covers the query (its planning reads the footers, as
// sluice's Open does) to the last chunk; creating the database and loading
// the module are not timed. DuckDB hands out chunks of its vector size
// (2048 rows); --batch-size is recorded, not applied.
//
// On failure it prints {"peer":"duckdb","error":"..."} and exits with 1.
import { parseArgs } from 'node:util';
import { readFileSync } from 'node:fs';
import { DuckDBInstance } from '@duckdb/node-api';

// version is the version of an installed package, read from its
// package.json beside this script (the packages do not all export it).
const version = (name) =>
  JSON.parse(readFileSync(new URL(`./node_modules/${name}/package.json`, import.meta.url))).version;

function fail(err) {
  console.log(JSON.stringify({ peer: 'duckdb', error: String(err?.stack ?? err) }));
  process.exit(1);
}

// quoteString and quoteIdent make SQL literals of a path and column names.
const quoteString = (s) => `'${s.replaceAll("'", "''")}'`;
const quoteIdent = (s) => `"${s.replaceAll('"', '""')}"`;

async function main() {
  const { values: opt } = parseArgs({
    options: {
      data: { type: 'string' },
      columns: { type: 'string' },
      'batch-size': { type: 'string', default: '1024' },
      threads: { type: 'string' },
    },
  });
  if (!opt.data || !opt.columns) {
    throw new Error('usage: node duckdb.mjs --data DIR --columns a,b,c [--batch-size N] [--threads N]');
  }
  const columns = opt.columns.split(',').filter((c) => c !== '');
  const config = {};
  if (opt.threads) config.threads = opt.threads;
  const instance = await DuckDBInstance.create(':memory:', config);
  const con = await instance.connect();
  const settings = (await con.runAndReadAll("SELECT version(), current_setting('threads')")).getRows()[0];

  const glob = `${opt.data.replace(/\/+$/, '')}/*.parquet`;
  const sql = `SELECT ${columns.map(quoteIdent).join(', ')} FROM read_parquet(${quoteString(glob)})`;

  const start = performance.now();
  const result = await con.stream(sql);
  let rows = 0;
  let chunks = 0;
  let touched = 0;
  for (;;) {
    const chunk = await result.fetchChunk();
    if (chunk === null || chunk.rowCount === 0) break;
    const n = chunk.rowCount;
    if (chunk.columnCount !== columns.length) {
      throw new Error(`chunk has ${chunk.columnCount} columns, want ${columns.length}`);
    }
    for (let c = 0; c < chunk.columnCount; c++) {
      // Opening the vector maps its data into JavaScript; reading both ends
      // checks it is there.
      const v = chunk.getColumnVector(c);
      if (v.itemCount !== n) throw new Error(`column ${columns[c]}: ${v.itemCount} items in a chunk of ${n} rows`);
      if (v.getItem(0) !== null) touched++;
      if (v.getItem(n - 1) !== null) touched++;
    }
    rows += n;
    chunks++;
  }
  const seconds = (performance.now() - start) / 1000;

  console.log(JSON.stringify({
    peer: 'duckdb',
    scenario: 'sequential',
    rows,
    seconds,
    rows_per_s: rows / seconds,
    chunks,
    rows_per_chunk: chunks > 0 ? rows / chunks : 0,
    values_checked: touched,
    threads: Number(settings[1]),
    duckdb_version: String(settings[0]),
    node_api_version: version('@duckdb/node-api'),
    batch_size_requested: Number(opt['batch-size']),
    query: sql,
  }));
}

main().catch(fail);
