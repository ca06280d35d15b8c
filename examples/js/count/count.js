// `count`: a keyed running count, in JavaScript.
//
// For every input record it adds one to the count of the record's key and emits a record with
// the same key, the updated count as decimal ASCII digits (no sign, no leading zeros: the first
// record of a key gives `1`, the tenth `10`) and the same timestamp. The value is ignored. Keys
// are any bytes. This output is a cross-language contract: the Rust example
// (examples/rust/count) and the others emit byte-identical batches for the same input.
//
// State: the counts, a Map from the key (as a `bytesKey` string) to its count, checkpointed by
// the SDK's default JSON snapshot: there is no snapshot code here.
//
//   bash guest-sdk/js/build.sh count.wasm examples/js/count/count.js

import { Operator, bytesKey } from '../../../guest-sdk/js/index.js';

export default class Count extends Operator {
  constructor(ctx) {
    super(ctx);
    /** How many records of each key have been seen, by `bytesKey(key)`. */
    this.counts = new Map();
  }

  process(batch, out) {
    const counts = this.counts;
    for (const { key, timestamp } of batch) {
      const name = bytesKey(key);
      const count = (counts.get(name) ?? 0) + 1;
      counts.set(name, count);
      out.emit(key, String(count), timestamp);
    }
  }
}
