// duckdb_text.mjs: DuckDB reading text files for sluice's benchmark
// harness (the text scenario of go run ./bench).
//
//   node duckdb_text.mjs --glob 'DIR/*.csv' --reader csv|json --columns id,label,x,s [--threads N]
//
// Streams the selected columns of read_csv(GLOB) (header, dialect and types
// sniffed, as sluice infers them) or read_json(GLOB, format =
// 'newline_delimited') through DuckDB's streaming result API, opening every
// column vector of every chunk, and prints ONE JSON line: rows, seconds,
// rows_per_s and what DuckDB used. The time covers the query, sniffing
// included, to the last chunk; creating the database is not timed.
//
// On failure it prints {"peer":"duckdb","error":"..."} and exits with 1.
import { parseArgs } from 'node:util';
import { readFileSync } from 'node:fs';
import { DuckDBInstance } from '@duckdb/node-api';

const version = (name) =>
  JSON.parse(readFileSync(new URL(`./node_modules/${name}/package.json`, import.meta.url))).version;

function fail(err) {
  console.log(JSON.stringify({ peer: 'duckdb', error: String(err?.stack ?? err) }));
  process.exit(1);
}

const quoteString = (s) => `'${s.replaceAll("'", "''")}'`;
const quoteIdent = (s) => `"${s.replaceAll('"', '""')}"`;

async function main() {
  const { values: opt } = parseArgs({
    options: {
      glob: { type: 'string' },
      reader: { type: 'string' },
      columns: { type: 'string' },
      threads: { type: 'string' },
    },
  });
  if (!opt.glob || !opt.columns || !['csv', 'json'].includes(opt.reader)) {
    throw new Error('usage: node duckdb_text.mjs --glob GLOB --reader csv|json --columns a,b,c [--threads N]');
  }
  const columns = opt.columns.split(',').filter((c) => c !== '');
  const config = {};
  if (opt.threads) config.threads = opt.threads;
  const instance = await DuckDBInstance.create(':memory:', config);
  const con = await instance.connect();
  const settings = (await con.runAndReadAll("SELECT version(), current_setting('threads')")).getRows()[0];
  const from = opt.reader === 'csv'
    ? `read_csv(${quoteString(opt.glob)}, header = true)`
    : `read_json(${quoteString(opt.glob)}, format = 'newline_delimited')`;
  const sql = `SELECT ${columns.map(quoteIdent).join(', ')} FROM ${from}`;

  const start = performance.now();
  const result = await con.stream(sql);
  let rows = 0;
  let chunks = 0;
  let touched = 0;
  for (;;) {
    const chunk = await result.fetchChunk();
    if (chunk === null || chunk.rowCount === 0) break;
    const n = chunk.rowCount;
    for (let c = 0; c < chunk.columnCount; c++) {
      const v = chunk.getColumnVector(c);
      if (v.getItem(0) !== null) touched++;
      if (v.getItem(n - 1) !== null) touched++;
    }
    rows += n;
    chunks++;
  }
  const seconds = (performance.now() - start) / 1000;
  console.log(JSON.stringify({
    peer: 'duckdb',
    rows,
    seconds,
    rows_per_s: rows / seconds,
    chunks,
    values_checked: touched,
    threads: Number(settings[1]),
    duckdb_version: String(settings[0]),
    node_api_version: version('@duckdb/node-api'),
    query: sql,
  }));
}

main().catch(fail);
