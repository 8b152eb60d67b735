// sql.mjs: DuckDB as a reference engine for sluice's differential tests
// (package internal/testkit/duckdb starts it; it is not a benchmark peer).
//
//   node sql.mjs
//
// Reads one JSON request a line on standard input, {"sql": "..."}, runs it
// in one in-memory DuckDB database, and writes one JSON line a request:
// {"columns":[{"name":..,"type":..}],"rows":[[..],..]} with the values as
// @duckdb/node-api's JSON conversion gives them (BIGINT and DECIMAL as
// strings, dates and timestamps as ISO text, BLOB as escaped text), or
// {"error":"..."} when the query fails. The process ends with its input.
import { createInterface } from 'node:readline';
import { DuckDBInstance } from '@duckdb/node-api';

const instance = await DuckDBInstance.create(':memory:');
const connection = await instance.connect();

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of lines) {
  if (line.trim() === '') continue;
  let out;
  try {
    const { sql } = JSON.parse(line);
    const reader = await connection.runAndReadAll(sql);
    const names = reader.columnNames();
    const types = reader.columnTypes().map((t) => t.toString());
    out = {
      columns: names.map((name, i) => ({ name, type: types[i] })),
      rows: reader.getRowsJson(),
    };
  } catch (err) {
    out = { error: String(err?.message ?? err) };
  }
  process.stdout.write(JSON.stringify(out) + '\n');
}
connection.closeSync?.();
