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
import { connect, fail, quoteIdent, quoteString, streamAll, version } from './duckdb_stream.mjs';

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
  const { con, settings } = await connect(opt.threads);

  const glob = `${opt.data.replace(/\/+$/, '')}/*.parquet`;
  const sql = `SELECT ${columns.map(quoteIdent).join(', ')} FROM read_parquet(${quoteString(glob)})`;

  const { rows, seconds, chunks, touched } = await streamAll(con, sql, columns);

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
