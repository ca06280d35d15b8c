// The host-count's unit tests, under Node's test runner with the SDK's native harness:
//   node --test examples/js/host-count/
// It must emit what the JavaScript count (examples/js/count) emits, batch for batch, through
// restores of the host's checkpoints and rescales of its keyed state.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Context } from '../../../guest-sdk/js/index.js';
import { Harness, assertRecordsEqual, encodeBatch, record } from '../../../guest-sdk/js/testing.js';
import { keyGroup, owner } from '../../../guest-sdk/js/src/keyed.js';
import Count from '../count/count.js';
import HostCount from './host-count.js';

const context = new Context('host-count');

test('emits the updated count of each key as decimal text', () => {
  const harness = new Harness(HostCount, context);
  const out = harness.pushOn(0, [record('a', 'x', 1), record('b', 'y', 2), record('a', 'z', 3), record('', '', 4)]);
  assertRecordsEqual(out, [record('a', '1', 1), record('b', '1', 2), record('a', '2', 3), record('', '1', 4)]);
});

test('the counts live on the host and the snapshot is empty', () => {
  const harness = new Harness(HostCount, context);
  for (const key of ['a', 'b', 'a']) harness.push(key);
  assert.equal(harness.snapshot().length, 0);
  const stored = harness.keyedState().map(([state, key, value]) => [state, new TextDecoder().decode(key), new TextDecoder().decode(value)]);
  assert.deepEqual(stored.sort(), [[0, 'a', '2'], [0, 'b', '1']]);
});

test('emits the batches of the JavaScript count through checkpoints and failures', () => {
  const keys = ['', '\0', 'river', 'weir', 'k'.repeat(1000), ...Array.from({ length: 40 }, (_, i) => `key-${i}`)];
  let seed = 7;
  const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31);
  const records = Array.from({ length: 600 }, (_, ts) => record(keys[next() % keys.length], '', ts));
  for (const size of [1, 7, 200]) {
    const batches = [];
    for (let i = 0; i < records.length; i += size) batches.push(records.slice(i, i + size));
    const host = new Harness(HostCount, context);
    const straight = new Harness(Count, context);
    const want = batches.map((batch) => straight.pushBatch(encodeBatch(0, batch)));
    let checkpoint = host.checkpoint();
    const got = [];
    const failed = new Set();
    for (let index = 0; index < batches.length; ) {
      got.push(host.pushBatch(encodeBatch(0, batches[index])));
      index++;
      if (index % 3 === 0) {
        checkpoint = host.checkpoint();
      } else if (index % 5 === 0 && !failed.has(index)) {
        // A failure: back to the last checkpoint, and the batches after it again.
        failed.add(index);
        host.restoreCheckpoint(checkpoint);
        index -= index % 3;
        got.length = index;
      }
    }
    assert.deepEqual(got, want, `batches of ${size}`);
  }
});

test('rescaled two to three to one, it counts on', () => {
  const keys = Array.from({ length: 300 }, (_, i) => `word-${i}`);
  const encoder = new TextEncoder();
  const subtaskOf = (key, parallelism) => owner(keyGroup(encoder.encode(key), 128), parallelism, 128);
  let harnesses = [0, 1].map((subtask) => new Harness(HostCount, new Context('host-count', { subtask, parallelism: 2 })));
  const counts = new Map();
  for (const parallelism of [3, 1]) {
    keys.forEach((key, ts) => {
      counts.set(key, (counts.get(key) ?? 0) + 1);
      const out = harnesses[subtaskOf(key, harnesses.length)].push(key, '', ts);
      assertRecordsEqual(out, [record(key, String(counts.get(key)), ts)]);
    });
    const checkpoints = harnesses.map((harness) => harness.checkpoint());
    harnesses = Harness.rescale(HostCount, context, checkpoints, parallelism);
  }
  keys.forEach((key, ts) => assertRecordsEqual(harnesses[0].push(key, '', ts), [record(key, '3', ts)]));
});
