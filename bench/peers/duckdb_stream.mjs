// duckdb_stream.mjs: what the DuckDB peers (duckdb.mjs reading Parquet,
// duckdb_text.mjs reading CSV and JSON) share: opening DuckDB, quoting SQL,
// streaming a query's result through the streaming API, and reporting.
import { readFileSync } from 'node:fs';
import { DuckDBInstance } from '@duckdb/node-api';

// version is the version of an installed package, read from its
// package.json beside this script (the packages do not all export it).
export const version = (name) =>
  JSON.parse(readFileSync(new URL(`./node_modules/${name}/package.json`, import.meta.url))).version;

export function fail(err) {
  console.log(JSON.stringify({ peer: 'duckdb', error: String(err?.stack ?? err) }));
  process.exit(1);
}

// quoteString and quoteIdent make SQL literals of a path and column names.
export const quoteString = (s) => `'${s.replaceAll("'", "''")}'`;
export const quoteIdent = (s) => `"${s.replaceAll('"', '""')}"`;

// connect opens an in-memory database on threads threads (DuckDB's default
// where unset) and returns a connection and what DuckDB says it runs:
// [version, threads].
export async function connect(threads) {
  const config = {};
  if (threads) config.threads = threads;
  const instance = await DuckDBInstance.create(':memory:', config);
  const con = await instance.connect();
  const settings = (await con.runAndReadAll("SELECT version(), current_setting('threads')")).getRows()[0];
  return { con, settings };
}

// streamAll runs sql, whose result has the given columns, and takes every
// chunk of its result until the end, opening every column vector of every
// chunk so that nothing is skipped. The time covers the query (its planning
// included) to the last chunk.
export async function streamAll(con, sql, columns) {
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
  return { rows, seconds, chunks, touched };
}
