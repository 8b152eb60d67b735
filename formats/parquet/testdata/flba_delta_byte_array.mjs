// Writes flba_delta_byte_array.parquet with arrow-rs (parquet-wasm 0.8.0):
// FIXED_LEN_BYTE_ARRAY columns in DELTA_BYTE_ARRAY encoding, which arrow-go
// cannot decode and its writer cannot write. Run from a folder where
// `npm install parquet-wasm@0.8.0 apache-arrow@18.1.0` was run:
//   node flba_delta_byte_array.mjs flba_delta_byte_array.parquet
import * as arrow from 'apache-arrow';
import * as pw from 'parquet-wasm/node';
import { writeFileSync } from 'fs';
const N = 300;
const ids = Int32Array.from({length: N}, (_, i) => i);
// UUIDs that share prefixes of several lengths, some null.
const u = [], f = [];
for (let i = 0; i < N; i++) {
  if (i % 7 === 3) { u.push(null); } else {
    const b = new Uint8Array(16);
    for (let j = 0; j < 16; j++) b[j] = (j < (i % 17)) ? 0x55 : ((i * 31 + j * 17) & 0xff);
    b[6] = (b[6] & 0x0f) | 0x40; b[8] = (b[8] & 0x3f) | 0x80;
    u.push(b);
  }
  f.push(Uint8Array.from([i & 0xff, (i >> 8) & 0xff, 7]));
}
const uType = new arrow.FixedSizeBinary(16);
const fType = new arrow.FixedSizeBinary(3);
const uField = new arrow.Field('u', uType, true, new Map([['ARROW:extension:name', 'arrow.uuid'], ['ARROW:extension:metadata', '']]));
const fField = new arrow.Field('f', fType, false);
const idField = new arrow.Field('id', new arrow.Int32(), false);
const schema = new arrow.Schema([idField, uField, fField]);
const uVec = arrow.vectorFromArray(u, uType);
const fVec = arrow.vectorFromArray(f, fType);
const idVec = arrow.vectorFromArray(ids, new arrow.Int32());
const batch = new arrow.RecordBatch(schema, arrow.makeData({type: new arrow.Struct(schema.fields), length: N, nullCount: 0, children: [idVec.data[0], uVec.data[0], fVec.data[0]]}));
const table = new arrow.Table(schema, batch);
const ipc = arrow.tableToIPC(table, 'stream');
const wt = pw.Table.fromIPCStream(ipc);
const props = new pw.WriterPropertiesBuilder()
  .setDictionaryEnabled(false)
  .setColumnEncoding('u', pw.Encoding.DELTA_BYTE_ARRAY)
  .setColumnEncoding('f', pw.Encoding.DELTA_BYTE_ARRAY)
  .setCompression(pw.Compression.SNAPPY)
  .setDataPageSizeLimit(512)
  .setMaxRowGroupSize(200)
  .setWriterVersion(pw.WriterVersion.V2)
  .build();
const out = pw.writeParquet(wt, props);
writeFileSync(process.argv[2], out);
console.log('wrote', out.length);
