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
import { connect, fail, quoteIdent, quoteString, streamAll, version } from './duckdb_stream.mjs';

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
  const { con, settings } = await connect(opt.threads);
  const from = opt.reader === 'csv'
    ? `read_csv(${quoteString(opt.glob)}, header = true)`
    : `read_json(${quoteString(opt.glob)}, format = 'newline_delimited')`;
  const sql = `SELECT ${columns.map(quoteIdent).join(', ')} FROM ${from}`;

  const { rows, seconds, chunks, touched } = await streamAll(con, sql, columns);
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
