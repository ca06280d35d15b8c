// The component tests: they build components with build.mjs and run them in the Harness
// (through testing-component.js), checking that a component emits, snapshots and fails exactly
// as the native run of the same JavaScript does. Slower than test/ (each build takes seconds):
//
//   node --test guest-sdk/js/component-test/

import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { build } from '../build.mjs';
import { Context, END_OF_TIME, NO_WATERMARK, bytesKey } from '../index.js';
import { Harness, assertRecordsEqual, assertRestorePreservesOutput, encodeBatch, record } from '../testing.js';
import { loadComponent } from '../testing-component.js';
import Count from '../../../examples/js/count/count.js';
import Probe from './probe.js';

const repo = fileURLToPath(new URL('../../../', import.meta.url));
const context = new Context('count');
let work;
const components = {};

before(async () => {
  work = await mkdtemp(join(tmpdir(), 'weir-js-component-test-'));
  const sources = {
    count: 'examples/js/count/count.js',
    probe: 'guest-sdk/js/component-test/probe.js',
    hostile: 'tests/guests/js/hostile.js',
  };
  for (const [name, source] of Object.entries(sources)) {
    const out = join(work, `${name}.wasm`);
    await build(out, join(repo, source));
    components[name] = await loadComponent(out);
  }
});

after(() => rm(work, { recursive: true, force: true }));

/** The context of the hostile guest doing `behaviour` (tests/guests/js/hostile.js). */
function hostile(behaviour) {
  return new Context('hostile', { config: new TextEncoder().encode(behaviour) });
}

/** A small deterministic generator (xorshift64*), as tests/all/languages.rs uses. */
function rng(seed) {
  let state = BigInt(seed);
  const next = () => {
    state ^= state >> 12n;
    state ^= (state << 25n) & 0xffffffffffffffffn;
    state ^= state >> 27n;
    return (state * 0x2545f4914f6cdd1dn) & 0xffffffffffffffffn;
  };
  return { next, below: (n) => Number(next() % BigInt(n)) };
}

/** Records over awkward keys, some far more frequent than others, with extreme timestamps. */
function countInput(random, n) {
  const keys = [new Uint8Array(0), new Uint8Array([0]), new Uint8Array([0xff, 0x00, 0x80]), new Uint8Array(1000).fill(0x6b)];
  for (let i = 0; i < 40; i++) keys.push(new TextEncoder().encode(`key-${i}`));
  return Array.from({ length: n }, () => {
    const pick = random.below(keys.length);
    const key = keys[Math.floor((pick * pick) / keys.length)];
    const value = Uint8Array.from({ length: random.below(24) }, () => random.below(256));
    const roll = random.below(50);
    const timestamp = roll === 0 ? NO_WATERMARK : roll === 1 ? END_OF_TIME : BigInt.asIntN(64, random.next()) >> BigInt(random.below(64));
    return record(key, value, timestamp);
  });
}

test('the count component emits byte-identical batches to the native run, at every batch size', () => {
  const random = rng(0x5eed);
  const input = countInput(random, 1500);
  for (const size of [1, 7, 64, 500, 1500]) {
    const component = new Harness(components.count, context);
    const native = new Harness(Count, context);
    for (let at = 0; at < input.length; at += size) {
      if (random.below(10) === 0) {
        assert.deepEqual(component.pushBatchEncoded(encodeBatch(0, [])), []);
      }
      const batch = encodeBatch(0, input.slice(at, at + size));
      const got = component.pushBatchEncoded(batch);
      assert.equal(got.length, 1, `one batch per input batch (batches of ${size})`);
      assert.deepEqual(got, native.pushBatchEncoded(batch), `batches of ${size}, at record ${at}`);
    }
    assert.deepEqual(component.snapshot(), native.snapshot(), 'the same JSON snapshot');
  }
});

test('count snapshots restore across the native run and the component, both ways', () => {
  const input = countInput(rng(7), 400);
  const [first, rest] = [input.slice(0, 200), input.slice(200)];
  const native = new Harness(Count, context);
  const component = new Harness(components.count, context);
  native.pushOn(0, first);
  component.pushOn(0, first);
  const fromNative = native.snapshot();
  const fromComponent = component.snapshot();
  const expected = native.pushOn(0, rest);
  component.restoreIntoFresh(fromNative);
  assertRecordsEqual(component.pushOn(0, rest), expected);
  native.restoreIntoFresh(fromComponent);
  assertRecordsEqual(native.pushOn(0, rest), expected);
});

test('restoring the count component at any point preserves its output', () => {
  const input = countInput(rng(11), 60);
  for (const every of [1, 7]) assertRestorePreservesOutput(components.count, context, input, every);
});

/** Runs `steps` through a harness: records (as [key, command, timestamp]) and time moves. */
function runProbe(subject, steps) {
  const harness = new Harness(subject, new Context('probe', { config: 'configured' }));
  const main = [];
  for (const step of steps) {
    if (step.watermark !== undefined) main.push(...harness.advanceWatermark(step.watermark));
    else if (step.clock !== undefined) main.push(...harness.advanceProcessingTime(step.clock));
    else if (step.restore) harness.snapshotAndRestore();
    else main.push(...harness.pushOn(step.port ?? 0, [record(...step.record)]));
  }
  main.push(...harness.finish());
  return { main, late: harness.sideOutput('late'), logs: harness.logs, state: harness.snapshot() };
}

test('timers, watermarks, side outputs, logs and finish behave the same in the component', () => {
  const steps = [
    { record: ['b', 'set E 20', 0] },
    { record: ['z', 'set E 10', 0] },
    { record: [new Uint8Array([0xff, 0]), 'set E 20', 0] },
    { record: ['a', 'set E 20', 0] },
    { record: ['p', 'set P 15', 0] },
    { record: ['gone', 'set E 5', 0] },
    { record: ['gone', 'del E 5', 0] },
    { record: [new Uint8Array([0, 1]), 'side late', -7] },
    { record: ['k', 'log hello from the guest', 0], port: 3 },
    { record: ['e', 'echo', END_OF_TIME] },
    { restore: true },
    { watermark: 20 },
    { clock: 14 },
    { clock: 15 },
    { record: ['far', `set E ${2 ** 40}`, 0] },
    { watermark: 2n ** 60n },
  ];
  const native = runProbe(Probe, steps);
  const component = runProbe(components.probe, steps);
  assertRecordsEqual(component.main, native.main);
  assert.equal(native.main.length, 11);
  assertRecordsEqual(component.late, native.late);
  assert.deepEqual(component.late, [record(new Uint8Array([0, 1]), bytesKey(new Uint8Array([0, 1])), -7)]);
  assert.deepEqual(component.logs, native.logs);
  assert.deepEqual(component.logs, [{ level: 'info', message: 'hello from the guest {"port":3}' }]);
  assert.deepEqual(component.state, native.state);
});

test('an exception in the component fails the call with its message and a stack of the source files', async () => {
  const harness = new Harness(components.probe, new Context('probe'));
  const source = await readFile(join(repo, 'guest-sdk/js/component-test/probe.js'), 'utf8');
  const line = source.split('\n').findIndex((text) => text.includes('throw new Error(`asked to fail at')) + 1;
  assert.ok(line > 0);
  assert.throws(() => harness.push('k', 'fail', 42), (error) => {
    assert.equal(error.name, 'OperatorError');
    assert.equal(error.call, 'process');
    assert.match(error.operatorMessage, /^Error: asked to fail at 42\n/);
    // The engine runs the bundle, but the stack names the operator's own file and line.
    assert.match(error.operatorMessage, new RegExp(`process@\\S*component-test/probe\\.js:${line}:\\d+`), error.operatorMessage);
    assert.doesNotMatch(error.operatorMessage, /operator\.js:/, error.operatorMessage);
    return true;
  });
  assert.throws(() => harness.push('k', 'echo', 1), { message: /the instance already failed/ });
});

test('SDK misuse in the component is an error with the SDK\'s message, not a trap', () => {
  const harness = new Harness(components.probe, new Context('probe'));
  assert.throws(() => harness.push('k', 'negative', 0), { message: /process failed: WeirError: Output.setTimer: the timestamp -1 is negative/ });
  const malformed = new Harness(components.probe, new Context('probe'));
  assert.throws(() => malformed.pushBatch(new Uint8Array([1, 0, 0, 0, 0, 0, 0, 0])), { message: /malformed input batch: 1 records cannot fit in 8 bytes/ });
  const garbage = new Harness(components.count, context);
  assert.throws(() => garbage.restoreIntoFresh(new TextEncoder().encode('no snapshot')), { call: 'restore', message: /the snapshot does not decode/ });
});

test('the component has clocks and randomness, and none of Node\'s globals', () => {
  const harness = new Harness(components.probe, new Context('probe'));
  harness.push('k', 'ambient');
  assert.deepEqual(harness.logs, [{ level: 'info', message: 'now true random true process undefined require undefined fetch function' }]);
});

test('fetch exists in the component, and calling it traps the instance', () => {
  const harness = new Harness(components.hostile, hostile('fetch'));
  assert.throws(() => harness.push('k'), { name: 'OperatorError', message: /trap: .*unreachable/ });
  assert.deepEqual(harness.logs, [{ level: 'info', message: 'fetch is function' }]);
});

test('allocating without bound traps the instance when the engine runs out of memory', () => {
  const harness = new Harness(components.hostile, hostile('allocate'));
  assert.throws(() => harness.push('k'), { name: 'OperatorError', message: /trap: .*unreachable/ });
});

test('components are about 12 MB', async () => {
  const { size } = await stat(join(work, 'count.wasm'));
  assert.ok(size > 5e6 && size < 30e6, `count.wasm is ${size} bytes`);
});
