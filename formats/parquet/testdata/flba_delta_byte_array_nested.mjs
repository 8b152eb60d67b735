// Writes flba_delta_byte_array_nested.parquet with arrow-rs (parquet-wasm 0.8.0):
// FIXED_LEN_BYTE_ARRAY(16) inside a struct (s.u) and a list (l.list.element)
// in DELTA_BYTE_ARRAY encoding, which arrow-go cannot decode and the driver
// refuses. Run from a folder where
// `npm install parquet-wasm@0.8.0 apache-arrow@18.1.0` was run:
//   node flba_delta_byte_array_nested.mjs flba_delta_byte_array_nested.parquet
import * as arrow from 'apache-arrow';
import * as pw from 'parquet-wasm/node';
import { writeFileSync } from 'fs';
const N = 60;
function uuid(i, k) {
  const b = new Uint8Array(16);
  for (let j = 0; j < 16; j++) b[j] = (j < (i % 17)) ? 0x55 : ((i * 31 + j * 17 + k * 7) & 0xff);
  return b;
}
const uType = new arrow.FixedSizeBinary(16);
const meta = new Map([['ARROW:extension:name', 'arrow.uuid'], ['ARROW:extension:metadata', '']]);
const uField = new arrow.Field('u', uType, true, meta);
const sType = new arrow.Struct([uField]);
const eField = new arrow.Field('element', uType, true, meta);
const lType = new arrow.List(eField);
const schema = new arrow.Schema([new arrow.Field('id', new arrow.Int32(), false), new arrow.Field('s', sType, true), new arrow.Field('l', lType, true)]);
const ids = [], ss = [], ls = [];
for (let i = 0; i < N; i++) {
  ids.push(i);
  ss.push(i % 11 === 4 ? null : {u: i % 5 === 2 ? null : uuid(i, 0)});
  if (i % 13 === 6) { ls.push(null); continue; }
  const l = [];
  for (let k = 0; k < i % 4; k++) l.push(k === 2 && i % 3 === 0 ? null : uuid(i, k + 1));
  ls.push(l);
}
const vecs = [arrow.vectorFromArray(ids, new arrow.Int32()), arrow.vectorFromArray(ss, sType), arrow.vectorFromArray(ls, lType)];
const batch = new arrow.RecordBatch(schema, arrow.makeData({type: new arrow.Struct(schema.fields), length: N, nullCount: 0, children: vecs.map(v => v.data[0])}));
const ipc = arrow.tableToIPC(new arrow.Table(schema, batch), 'stream');
const props = new pw.WriterPropertiesBuilder()
  .setDictionaryEnabled(false)
  .setColumnEncoding('s.u', pw.Encoding.DELTA_BYTE_ARRAY)
  .setColumnEncoding('l.list.element', pw.Encoding.DELTA_BYTE_ARRAY)
  .setDataPageSizeLimit(256)
  .setWriterVersion(pw.WriterVersion.V2)
  .build();
const out = pw.writeParquet(pw.Table.fromIPCStream(ipc), props);
writeFileSync(process.argv[2], out);
console.log('wrote', out.length);
