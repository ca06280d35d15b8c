// The count's unit tests, under Node's test runner with the SDK's native harness:
//   node --test examples/js/count/

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Context, END_OF_TIME, NO_WATERMARK, bytesKey } from '../../../guest-sdk/js/index.js';
import {
  Harness,
  assertRecordsEqual,
  assertRestorePreservesOutput,
  encodeBatch,
  record,
} from '../../../guest-sdk/js/testing.js';
import Count from './count.js';

const context = new Context('count');

test('emits the updated count of each key as decimal text, with the same key and timestamp', () => {
  const harness = new Harness(Count, context);
  const out = harness.pushOn(0, [
    record('a', 'x', 1),
    record('b', 'y', 2),
    record('a', 'z', 3),
    record('', '', 4),
  ]);
  assertRecordsEqual(out, [record('a', '1', 1), record('b', '1', 2), record('a', '2', 3), record('', '1', 4)]);
});

test('counts past one digit', () => {
  const harness = new Harness(Count, context);
  let last;
  for (let ts = 0; ts < 12; ts++) last = harness.push('k', '', ts);
  assertRecordsEqual(last, [record('k', '12', 11)]);
});

test('keys are any bytes: empty, zero bytes, non-UTF-8, 1000 bytes', () => {
  const harness = new Harness(Count, context);
  const keys = [new Uint8Array(0), new Uint8Array([0]), new Uint8Array([0xff, 0x00, 0x80]), new Uint8Array(1000).fill(0x6b)];
  for (const key of keys) harness.push(key, 'v', 7);
  const out = harness.pushOn(0, keys.map((key) => record(key, '', 8)));
  assertRecordsEqual(out, keys.map((key) => record(key, '2', 8)));
  assert.equal(harness.operator.counts.size, 4);
});

test('timestamps come back exactly, i64::MIN and i64::MAX included', () => {
  const harness = new Harness(Count, context);
  const stamps = [NO_WATERMARK, END_OF_TIME, -1, 2 ** 53 - 1, 2n ** 53n, -(2n ** 53n)];
  const out = harness.pushOn(0, stamps.map((ts) => record('t', '', ts)));
  assert.deepEqual(out.map((r) => r.timestamp), [NO_WATERMARK, END_OF_TIME, -1, 2 ** 53 - 1, 2n ** 53n, -(2n ** 53n)]);
});

test('emits exactly one batch per non-empty input batch, in the layout of docs/ABI.md §5', () => {
  const harness = new Harness(Count, context);
  assert.deepEqual(harness.pushBatchEncoded(encodeBatch(0, [])), []);
  const input = Array.from({ length: 1500 }, (_, i) => record(i % 9 === 0 ? 'k'.repeat(1000) : `key-${i % 7}`, 'v', i));
  const seen = new Map();
  const expected = input.map(({ key, timestamp }) => {
    const name = bytesKey(key);
    seen.set(name, (seen.get(name) ?? 0) + 1);
    return record(key, String(seen.get(name)), timestamp);
  });
  const batches = harness.pushBatchEncoded(encodeBatch(0, input));
  assert.equal(batches.length, 1, 'one output batch, although it is larger than 64 KiB');
  assert.deepEqual(batches[0], encodeBatch(0, expected));
});

test('the counts survive a restore', () => {
  const harness = new Harness(Count, context);
  harness.push('a', '', 1);
  harness.push('a', '', 2);
  harness.snapshotAndRestore();
  assertRecordsEqual(harness.push('a', '', 3), [record('a', '3', 3)]);
});

test('a snapshot restores every key, whatever order they came in', () => {
  const harness = new Harness(Count, context);
  for (let ts = 0; ts < 300; ts++) harness.push(`key-${ts % 150}`, '', ts);
  harness.push(new Uint8Array([0xff, 0, 0x80]), '', 300);
  harness.snapshotAndRestore();
  for (let i = 0; i < 150; i++) assert.equal(harness.operator.counts.get(`key-${i}`), 2);
  assert.equal(harness.operator.counts.get(bytesKey(new Uint8Array([0xff, 0, 0x80]))), 1);
  assert.equal(harness.operator.counts.size, 151);
});

test('the snapshot is the default JSON of the counts', () => {
  const harness = new Harness(Count, context);
  harness.push('a', '', 1);
  harness.push(new Uint8Array([0, 0xff]), '', 1);
  const json = new TextDecoder().decode(harness.snapshot());
  assert.equal(json, '{"counts":{"$weir":"map","keys":["a","\\u0000\u00ff"],"values":[1,1]}}');
});

test('a garbage snapshot fails restore with a message', () => {
  const harness = new Harness(Count, context);
  assert.throws(
    () => harness.restoreIntoFresh(new TextEncoder().encode('this is no snapshot of any count')),
    { name: 'OperatorError', call: 'restore', message: /the snapshot does not decode/ },
  );
});

test('restoring at any point preserves the output', () => {
  const keys = ['a', 'b', 'a', 'c', 'a', 'b', '\u0000', 'a'];
  const input = keys.map((key, ts) => record(key, 'v', ts));
  for (let every = 1; every <= 3; every++) assertRestorePreservesOutput(Count, context, input, every);
});
