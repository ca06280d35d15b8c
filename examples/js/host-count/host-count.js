// `host-count`: the keyed running count of examples/js/count, its counts kept on the host.
//
// For every input record it adds one to the count of the record's key and emits a record with
// the same key, the updated count as decimal ASCII digits and the same timestamp: record for
// record, batch for batch, the output of examples/js/count and of the count in every other
// language.
//
// State: one ValueState (state 0), a count per key, kept by the host's keyed store
// (docs/STATE.md), not in the operator's fields. So the state is not capped by the component's
// memory, a checkpoint stores what changed rather than the JSON of every count, and a change of
// parallelism moves each key's count with the key, with no code here. The operator has no
// fields, so its own snapshot is empty. Each batch costs two calls to the host, whatever its
// size: one read of the counts of its distinct keys, one write of their new counts.
//
//   bash guest-sdk/js/build.sh host-count.wasm examples/js/host-count/host-count.js
//
// (it mentions ValueState, so it is built against the world `keyed-operator`).

import { Operator, ValueState, bytesKey } from '../../../guest-sdk/js/index.js';

/** The count of each key, kept on the host as state 0. */
export const COUNTS = new ValueState(0);

export default class HostCount extends Operator {
  process(batch, out) {
    const records = [...batch];
    if (records.length === 0) return;
    // The distinct keys of the batch, in their first order: one read for all of them.
    const keys = new Map();
    for (const { key } of records) {
      const name = bytesKey(key);
      if (!keys.has(name)) keys.set(name, key);
    }
    const stored = COUNTS.getMany(out, keys.values());
    const counts = new Map();
    let i = 0;
    for (const name of keys.keys()) counts.set(name, stored[i++] ?? 0);
    for (const { key, timestamp } of records) {
      const name = bytesKey(key);
      const count = counts.get(name) + 1;
      counts.set(name, count);
      out.emit(key, String(count), timestamp);
    }
    COUNTS.putMany(out, [...keys].map(([name, key]) => [key, counts.get(name)]));
  }
}
