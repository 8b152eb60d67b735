// duckdb_native.mjs: DuckDB reading Parquet at its own speed, for sluice's
// benchmark harness (go run ./bench): the duckdb_native line and the
// ratio_vs_duckdb_native field of the sequential lines.
//
//   node duckdb_native.mjs --data DIR | --files a.parquet,b.parquet [--columns id,x,label] [--threads N] [--reps 3]
//
// Runs one aggregate over every row of the files and the columns selected
// (all without --columns),
//
//   SELECT count(*), sum(id), sum(x), ..., sum(strlen(s)) FROM read_parquet([...])
//
// every value of every selected column is decoded (a sum needs it, and
// strlen needs each string's bytes), but nothing is handed out: no chunk
// crosses into JavaScript, so this is DuckDB's decoding alone, where
// duckdb.mjs measures DuckDB handing every batch to a caller as sluice does.
// The query runs once untimed (DuckDB's first query starts its threads),
// then --reps times; the time is of the query alone, from the call to the
// one-row result, not of node's start or the database's creation. Prints
// ONE JSON line: rows (count(*), checked against the other runs), seconds
// and rows_per_s of the fastest run, every run's seconds, the least CPU
// (user and system, all of DuckDB's threads: process.cpuUsage) a run took
// and its rows_per_cpu_s, and what DuckDB used.
//
// On failure it prints {"peer":"duckdb","error":"..."} and exits with 1.
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { connect, fail, quoteIdent, quoteString, version } from './duckdb_stream.mjs';

// aggregateOf is the aggregate that decodes every value of a column of
// DuckDB type type without handing any out.
function aggregateOf(column, type) {
  const c = quoteIdent(column);
  if (/^(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT|FLOAT|DOUBLE|DECIMAL)/.test(type)) {
    return `sum(${c})`;
  }
  if (type === 'VARCHAR') return `sum(strlen(${c}))`;
  if (type === 'BLOB') return `sum(octet_length(${c}))`;
  if (type === 'BOOLEAN') return `sum(${c}::INTEGER)`;
  throw new Error(`column ${column} is ${type}: no aggregate that reads it is defined here`);
}

async function main() {
  const { values: opt } = parseArgs({
    options: {
      data: { type: 'string' },
      files: { type: 'string' },
      columns: { type: 'string' },
      threads: { type: 'string' },
      reps: { type: 'string', default: '3' },
    },
  });
  if (!opt.data && !opt.files) {
    throw new Error('usage: node duckdb_native.mjs --data DIR | --files a,b [--columns a,b,c] [--threads N] [--reps N]');
  }
  const files = opt.files
    ? opt.files.split(',').filter((f) => f !== '')
    : readdirSync(opt.data).filter((f) => f.endsWith('.parquet')).sort().map((f) => join(opt.data, f));
  if (files.length === 0) throw new Error(`no Parquet files in ${opt.data}`);
  const reps = Math.max(1, Number(opt.reps));
  const { con, settings } = await connect(opt.threads);

  const from = `read_parquet([${files.map(quoteString).join(', ')}])`;
  const selected = opt.columns ? opt.columns.split(',').filter((c) => c !== '').map(quoteIdent).join(', ') : '*';
  const described = (await con.runAndReadAll(`DESCRIBE SELECT ${selected} FROM ${from}`)).getRowObjects();
  const columns = described.map((r) => r.column_name);
  const types = Object.fromEntries(described.map((r) => [r.column_name, String(r.column_type)]));
  const sql = `SELECT count(*), ${columns.map((c) => aggregateOf(c, types[c])).join(', ')} FROM ${from}`;

  const once = async () => {
    const cpu = process.cpuUsage();
    const start = performance.now();
    const row = (await con.runAndReadAll(sql)).getRows()[0];
    const seconds = (performance.now() - start) / 1000;
    const used = process.cpuUsage(cpu);
    return { seconds, cpuSeconds: (used.user + used.system) / 1e6, rows: Number(row[0]) };
  };
  const warm = await once();
  const runs = [];
  const cpus = [];
  for (let i = 0; i < reps; i++) {
    const r = await once();
    if (r.rows !== warm.rows) throw new Error(`run ${i + 1} counted ${r.rows} rows, the first ${warm.rows}`);
    runs.push(r.seconds);
    cpus.push(r.cpuSeconds);
  }
  const seconds = Math.min(...runs);
  const cpuSeconds = Math.min(...cpus);
  console.log(JSON.stringify({
    peer: 'duckdb',
    scenario: 'native',
    rows: warm.rows,
    seconds,
    rows_per_s: warm.rows / seconds,
    runs_seconds: runs,
    cpu_seconds: cpuSeconds,
    rows_per_cpu_s: warm.rows / cpuSeconds,
    runs_cpu_seconds: cpus,
    files: files.length,
    threads: Number(settings[1]),
    duckdb_version: String(settings[0]),
    node_api_version: version('@duckdb/node-api'),
    query: sql.replace(from, `read_parquet([${files.length} files])`),
  }));
}

main().catch(fail);
