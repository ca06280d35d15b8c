// ValueState and the harness's emulation of the host's keyed state: the requests in the layout
// of abi/src/state.rs, the key groups of abi/src/key_group.rs, and checkpoints, restores and
// rescales that split the state by key group as the host does.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Context, Operator, ValueState, WeirError } from '../index.js';
import { Harness } from '../testing.js';
import { groupRange, keyGroup, keyHash, owner } from '../src/keyed.js';
import { BEGIN, Output, STATE_WRITE } from '../src/output.js';

const encoder = new TextEncoder();

// [key, key_hash, key_group among 128, among 7, among 32768], printed by a program calling
// weir_abi::key_group::{key_hash, key_group}.
const RUST_KEY_GROUPS = [
  [new Uint8Array(0), 0xcbf29ce484222325n, 37, 2, 8997],
  [encoder.encode('a'), 0xaf63dc4c8601ec8cn, 12, 5, 27788],
  [new Uint8Array([0]), 0xaf63bd4c8601b7dfn, 95, 3, 14303],
  [new Uint8Array([0xff, 0x00, 0x80]), 0xf920891be415651en, 30, 0, 25886],
  [encoder.encode('key-7'), 0x71135cf295f2820cn, 12, 2, 524],
  [encoder.encode('the'), 0x56f5c9194461d57cn, 124, 5, 21884],
  [encoder.encode('river'), 0xe2a0fb53030290d1n, 81, 2, 4305],
  [new Uint8Array(1000).fill(0x6b), 0x156dfe4694b8e4fdn, 125, 2, 25853],
  [encoder.encode('ünïcode'), 0xb1b0d40350a25bebn, 107, 6, 23531],
];

// [max_parallelism, parallelism, the ranges of KeyGroups::range], from the same program.
const RUST_RANGES = [
  [128, 3, [[0, 43], [43, 86], [86, 128]]],
  [128, 2, [[0, 64], [64, 128]]],
  [7, 3, [[0, 3], [3, 5], [5, 7]]],
  [1000, 7, [[0, 143], [143, 286], [286, 429], [429, 572], [572, 715], [715, 858], [858, 1000]]],
];

const COUNTS = new ValueState(0);

class HostCount extends Operator {
  process(batch, out) {
    for (const { key, value, timestamp } of batch) {
      if (new TextDecoder().decode(value) === 'forget') {
        COUNTS.delete(out, key);
        continue;
      }
      const count = (COUNTS.get(out, key) ?? 0) + 1;
      COUNTS.put(out, key, count);
      out.emit(key, String(count), timestamp);
    }
  }
}

test('the hash and the groups are the Rust functions', () => {
  for (const [key, hash, g128, g7, g32768] of RUST_KEY_GROUPS) {
    assert.equal(keyHash(key), hash);
    assert.deepEqual([keyGroup(key, 128), keyGroup(key, 7), keyGroup(key, 32768)], [g128, g7, g32768]);
  }
});

test('the ranges are the Rust ranges and agree with the owner', () => {
  for (const [max, p, ranges] of RUST_RANGES) {
    const got = Array.from({ length: p }, (_, s) => groupRange(s, p, max));
    assert.deepEqual(got, ranges);
    got.forEach(([start, end], subtask) => {
      for (let g = start; g < end; g++) assert.equal(owner(g, p, max), subtask);
    });
  }
});

test('a read sees the writes before it; values are JSON; undefined deletes', () => {
  const harness = new Harness(HostCount, new Context('c'));
  harness.pushOn(0, [{ key: 'a', value: '', timestamp: 1 }, { key: 'a', value: '', timestamp: 2 }]);
  assert.deepEqual(harness.keyedState(), [[0, encoder.encode('a'), encoder.encode('2')]]);
  harness.push('a', 'forget', 3);
  assert.deepEqual(harness.keyedState(), []);
  assert.equal(harness.push('a', '', 4)[0].value.toString(), encoder.encode('1').toString());
});

test('the requests are the ABI layout', () => {
  const seen = {};
  const host = {
    stateWrite: (request) => (seen.write = request),
    stateGet: (request) => {
      seen.read = request;
      return new Uint8Array([1, 0, 0, 0, 0x37, 0xff, 0xff, 0xff, 0xff]);
    },
  };
  const out = new Output(host);
  out[BEGIN]('process');
  COUNTS.putMany(out, [['k', 7], ['é', undefined]]);
  assert.deepEqual([...seen.write], [1, 0, 0, 1, 0, 0, 0, 0x6b, 1, 0, 0, 0, 0x37, 0, 0, 0, 2, 0, 0, 0, 0xc3, 0xa9]);
  assert.deepEqual(COUNTS.getMany(out, ['k', 'x']), [7, undefined]);
  assert.deepEqual([...seen.read], [0, 0, 1, 0, 0, 0, 0x6b, 0, 0, 1, 0, 0, 0, 0x78]);
});

test('a malformed request fails the call and changes nothing', () => {
  class Bad extends Operator {
    process(batch, out) {
      out[STATE_WRITE](new Uint8Array([1, 0, 0, 1, 0, 0, 0, 0x6b, 1, 0, 0, 0, 0x76, 9]));
    }
  }
  const harness = new Harness(Bad, new Context('c'));
  assert.throws(() => harness.push('k'), /malformed.*§17/);
  assert.deepEqual(harness.keyedState(), []);
});

test('state numbers are u16', () => {
  for (const bad of [-1, 65536, 1.5, '0']) assert.throws(() => new ValueState(bad), WeirError);
});

test('an operator with its state on the host has an empty snapshot', () => {
  const harness = new Harness(HostCount, new Context('c'));
  harness.push('k');
  assert.equal(harness.snapshot().length, 0);
});

test('a restored checkpoint has the values of its moment', () => {
  const harness = new Harness(HostCount, new Context('c'));
  harness.push('a');
  const checkpoint = harness.checkpoint();
  harness.push('a');
  harness.push('b');
  harness.restoreCheckpoint(checkpoint);
  assert.equal(new TextDecoder().decode(harness.push('a')[0].value), '2');
  assert.equal(new TextDecoder().decode(harness.push('b')[0].value), '1');
});

test('a rescale gives each key to the subtask that owns its group', () => {
  let harnesses = [0, 1].map((subtask) => new Harness(HostCount, new Context('c', { subtask, parallelism: 2 })));
  const keys = Array.from({ length: 200 }, (_, i) => encoder.encode(`key-${i}`));
  for (const parallelism of [3, 1, 2]) {
    for (const key of keys) harnesses[owner(keyGroup(key, 128), harnesses.length, 128)].push(key);
    harnesses = Harness.rescale(HostCount, new Context('c'), harnesses.map((h) => h.checkpoint()), parallelism);
    harnesses.forEach((harness, subtask) => {
      assert.equal(harness.context.subtask, subtask);
      const [start, end] = groupRange(subtask, parallelism, 128);
      for (const [, key] of harness.keyedState()) {
        const group = keyGroup(key, 128);
        assert.ok(group >= start && group < end);
      }
    });
    assert.equal(harnesses.reduce((n, h) => n + h.keyedState().length, 0), keys.length);
  }
});

test('a rescale of an operator with its own state is refused', () => {
  class Own extends Operator {
    constructor(ctx) {
      super(ctx);
      this.counts = new Map();
    }
    process() {}
  }
  const checkpoints = [new Harness(Own, new Context('c')).checkpoint()];
  assert.throws(() => Harness.rescale(Own, new Context('c'), checkpoints, 2), /subtask 0.*cannot/);
});
