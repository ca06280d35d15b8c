// Tests of testing.js: the harness emulates the host — its output checks, its timers, fired
// in its order, batching and rounds, its watermark and clock — and checks restores.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Context, END_OF_TIME, EVENT_TIME, NO_WATERMARK, Operator, PROCESSING_TIME, log, text } from '../index.js';
import {
  Harness,
  MAX_FIRING_ROUNDS,
  MAX_TIMERS_PER_CALL,
  assertRecordsEqual,
  assertRestorePreservesOutput,
  encodeBatch,
  record,
} from '../testing.js';

/** Emits each value with a running total of value lengths; fails on the value "boom". */
class Total extends Operator {
  constructor(ctx) {
    super(ctx);
    if (ctx.configString() === 'refuse') throw new Error(`operator \`${ctx.operator}\` refuses to start`);
    this.bytes = 0;
  }

  process(batch, out) {
    for (const { key, value, timestamp } of batch) {
      out.emit(key, 'partial', timestamp);
      if (text(value) === 'boom') throw new Error(`boom at ${timestamp}`);
      this.bytes += value.length;
      out.emit(key, String(this.bytes), timestamp);
    }
  }

  finish(out) {
    out.emit('total', String(this.bytes), END_OF_TIME);
  }
}

/**
 * Drives the time imports from its input: a record's value is a command (`set E 10`,
 * `set P 5`, `del E 10`, `side NAME`) for the record's key. Fired timers come out as records
 * `fired DOMAIN at WATERMARK`; the keys `forever` and `chain:N` set a due timer again when they
 * fire (forever, or N more times).
 */
class Timed extends Operator {
  constructor(ctx) {
    super(ctx);
    this.timerCalls = [];
  }

  process(batch, out) {
    for (const { key, value, timestamp } of batch) {
      const [command, code, at] = text(value).split(' ');
      const domain = code === 'E' ? EVENT_TIME : PROCESSING_TIME;
      if (command === 'set') out.setTimer(domain, Number(at), key);
      else if (command === 'del') out.deleteTimer(domain, Number(at), key);
      else if (command === 'side') out.emitTo(code, key, 's', timestamp);
      else throw new Error(`unknown command ${text(value)}`);
    }
  }

  onTimers(timers, out) {
    this.timerCalls.push(timers.length);
    for (const { key, timestamp } of timers) {
      const name = timers.domain === EVENT_TIME ? 'event' : 'processing';
      out.emit(key, `fired ${name} at ${out.watermark()}`, timestamp);
      const k = text(key);
      if (k === 'forever') out.setTimer(timers.domain, timestamp, key);
      else if (k.startsWith('chain:') && Number(k.slice(6)) > 0) {
        out.setTimer(timers.domain, timestamp, `chain:${Number(k.slice(6)) - 1}`);
      }
    }
  }

  onWatermark(watermark, out) {
    out.emit('watermark', String(watermark), watermark);
  }

  finish(out) {
    out.emit('finish', '', 0);
  }
}

const fired = (key, domain, ts, watermark) => record(key, `fired ${domain} at ${watermark}`, ts);

test('returns what each call emits, and finish runs last', () => {
  const h = new Harness(Total, new Context('total'));
  assertRecordsEqual(h.push('a', 'xyz', 1), [record('a', 'partial', 1), record('a', '3', 1)]);
  assert.equal(h.pushOn(2, [record('b', '', 2), record('c', '12', 3)]).length, 4);
  assertRecordsEqual(h.finish(), [record('total', '5', END_OF_TIME)]);
});

test('a failed call throws an OperatorError and its output is dropped; the instance is then failed', () => {
  const h = new Harness(Total, new Context('total'));
  assert.throws(() => h.pushOn(0, [record('a', 'x', 1), record('a', 'boom', 2)]), {
    name: 'OperatorError',
    call: 'process',
    message: /^process failed: Error: boom at 2/,
  });
  assert.throws(() => h.push('a', 'y', 3), { message: /the instance already failed/ });
});

test('a restore after a failure starts over from the snapshot, as a job restart does', () => {
  const h = new Harness(Total, new Context('total'));
  h.push('a', 'abcd', 1);
  const state = h.snapshot();
  assert.throws(() => h.push('a', 'boom', 2));
  h.restoreIntoFresh(state);
  assertRecordsEqual(h.push('a', 'ef', 3), [record('a', 'partial', 3), record('a', '6', 3)]);
});

test('a constructor that throws fails the Harness with the message', () => {
  assert.throws(() => new Harness(Total, new Context('t', { config: 'refuse' })), {
    name: 'OperatorError',
    call: 'init',
    message: /operator `t` refuses to start/,
  });
  assert.throws(() => new Harness(Total, {}), { name: 'WeirError', message: /must be a Context/ });
  assert.throws(() => new Harness(class {}), { name: 'WeirError', message: /not a subclass of Operator/ });
});

test('malformed batches fail as in a component', () => {
  const h = new Harness(Total, new Context());
  assert.throws(() => h.pushBatch(new Uint8Array([1, 0, 0, 0, 0, 0, 0, 0])), { message: /malformed input batch: 1 records cannot fit in 8 bytes/ });
});

test('output past 1 MiB comes back whole and in order', () => {
  const h = new Harness(Total, new Context());
  const value = 'v'.repeat(200 * 1024);
  const out = h.pushOn(0, Array.from({ length: 12 }, (_, ts) => record('k', value, ts)));
  assert.equal(out.length, 24);
  assert.deepEqual(out.map((r) => r.timestamp), Array.from({ length: 24 }, (_, i) => i >> 1));
});

test('timers fire once, in timestamp order with ties by key, with the new watermark; then onWatermark', () => {
  const h = new Harness(Timed, new Context('timed'));
  assert.equal(h.watermark(), NO_WATERMARK);
  for (const [key, command] of [['b', 'set E 20'], ['z', 'set E 10'], ['a', 'set E 20'], ['a', 'set E 20'], ['c', 'set E 30'], ['c', 'set P 15']]) {
    h.push(key, command, 0);
  }
  assert.equal(h.pendingTimers(EVENT_TIME).length, 4);
  assertRecordsEqual(h.advanceWatermark(20), [
    fired('z', 'event', 10, 20),
    fired('a', 'event', 20, 20),
    fired('b', 'event', 20, 20),
    record('watermark', '20', 20),
  ]);
  assert.deepEqual(h.operator.timerCalls, [3]);
  assert.deepEqual(h.advanceWatermark(20), [], 'no advance, no call');
  assert.deepEqual(h.pendingTimers(EVENT_TIME), [{ key: new Uint8Array([0x63]), timestamp: 30 }]);
  assert.throws(() => h.advanceWatermark(19), { message: 'the watermark cannot move back, from 20 to 19' });
});

test('ties are broken by key bytes, not by text: shorter prefixes first, bytes unsigned', () => {
  const h = new Harness(Timed, new Context());
  for (const key of [new Uint8Array([0xff]), new Uint8Array([0x01, 0x00]), new Uint8Array([0x01]), new Uint8Array(0)]) {
    h.pushOn(0, [record(key, 'set E 5', 0)]);
  }
  assert.deepEqual(h.pendingTimers(EVENT_TIME).map((t) => [...t.key]), [[], [1], [1, 0], [255]]);
});

test('deleted timers never fire, and timers behind the watermark wait for the next advance', () => {
  const h = new Harness(Timed, new Context());
  h.push('a', 'set E 10', 0);
  h.push('a', 'del E 10', 0);
  h.push('a', 'del E 99', 0);
  assert.deepEqual(h.pendingTimers(EVENT_TIME), []);
  h.advanceWatermark(50);
  h.push('b', 'set E 40', 0);
  assertRecordsEqual(h.advanceWatermark(51), [fired('b', 'event', 40, 51), record('watermark', '51', 51)]);
});

test('a firing hands at most 1024 timers to one call', () => {
  const h = new Harness(Timed, new Context());
  h.pushOn(0, Array.from({ length: 2500 }, (_, i) => record(`k${i}`, `set E ${i % 3}`, 0)));
  const out = h.advanceWatermark(10);
  assert.equal(MAX_TIMERS_PER_CALL, 1024);
  assert.deepEqual(h.operator.timerCalls, [1024, 1024, 452]);
  assert.equal(out.length, 2501);
  const stamps = out.slice(0, 2500).map((r) => r.timestamp);
  assert.deepEqual(stamps, [...stamps].sort((a, b) => a - b));
});

test('timers set while firing that are due fire in the next round; more than 64 rounds fail', () => {
  const h = new Harness(Timed, new Context());
  h.push('chain:3', 'set E 5', 0);
  const out = h.advanceWatermark(5);
  assert.deepEqual(out.map((r) => text(r.key)), ['chain:3', 'chain:2', 'chain:1', 'chain:0', 'watermark']);
  assert.deepEqual(h.operator.timerCalls, [1, 1, 1, 1]);
  const forever = new Harness(Timed, new Context());
  forever.push('forever', 'set E 5', 0);
  assert.equal(MAX_FIRING_ROUNDS, 64);
  assert.throws(() => forever.advanceWatermark(6), { name: 'OperatorError', message: /still due at 6 after 64 rounds of firing/ });
  assert.equal(forever.operator.timerCalls.length, 64);
});

test('processing-time timers fire when the clock moves, without onWatermark', () => {
  const h = new Harness(Timed, new Context());
  h.push('p', 'set P 100', 0);
  assert.deepEqual(h.advanceProcessingTime(99), []);
  assertRecordsEqual(h.advanceProcessingTime(100), [fired('p', 'processing', 100, NO_WATERMARK)]);
  assert.equal(h.processingTime(), 100);
  assert.throws(() => h.advanceProcessingTime(50), { message: /clock cannot move back, from 100 to 50/ });
});

test('finish fires every event-time timer, then onWatermark(END_OF_TIME), then finish; processing timers are dropped', () => {
  const h = new Harness(Timed, new Context());
  h.push('late', 'set E 1000000', 0);
  h.push('p', 'set P 5', 0);
  assertRecordsEqual(h.finish(), [
    fired('late', 'event', 1000000, END_OF_TIME),
    record('watermark', String(END_OF_TIME), END_OF_TIME),
    record('finish', '', 0),
  ]);
  assert.deepEqual(h.pendingTimers(PROCESSING_TIME), []);
});

test('side outputs are kept by name, in order, across restores', () => {
  const h = new Harness(Timed, new Context());
  h.push('a', 'side late', 1);
  h.snapshotAndRestore();
  h.pushOn(0, [record('b', 'side late', 2), record('c', 'side other', 3)]);
  assertRecordsEqual(h.sideOutput('late'), [record('a', 's', 1), record('b', 's', 2)]);
  assertRecordsEqual(h.sideOutput('other'), [record('c', 's', 3)]);
  assert.deepEqual(h.sideOutput('none'), []);
  assert.deepEqual(h.sideOutputNames(), ['late', 'other']);
});

test('a restore keeps the host\'s timers and watermark, as the host restores its own state', () => {
  const h = new Harness(Timed, new Context());
  h.push('t', 'set E 10', 0);
  h.advanceWatermark(5);
  h.snapshotAndRestore();
  assert.equal(h.watermark(), 5);
  assertRecordsEqual(h.advanceWatermark(10), [fired('t', 'event', 10, 10), record('watermark', '10', 10)]);
  assert.deepEqual(h.operator.timerCalls, [1], 'the fresh instance restored its own state');
});

test('restoreIntoFresh goes through the JSON snapshot, into a new instance', () => {
  const h = new Harness(Total, new Context());
  h.push('a', 'abcd', 1);
  const first = h.operator;
  const state = h.snapshot();
  assert.equal(new TextDecoder().decode(state), '{"bytes":4}');
  h.push('a', 'ef', 2);
  h.restoreIntoFresh(state);
  assert.notEqual(h.operator, first);
  assert.equal(h.operator.bytes, 4);
  assert.throws(() => h.restoreIntoFresh('{}'), { name: 'WeirError', message: /must be a Uint8Array/ });
});

test('checkpointComplete reaches the operator', () => {
  class Completes extends Operator {
    process() {}
    checkpointComplete(id) {
      this.last = id;
    }
  }
  const h = new Harness(Completes, new Context());
  h.checkpointComplete(3);
  assert.equal(h.operator.last, 3);
});

test('log lines are kept in order with their level', () => {
  class Logs extends Operator {
    process(batch) {
      log.warn('batch of', batch.length, 'on', { port: batch.port });
      log.debug(1n);
    }
  }
  const h = new Harness(Logs, new Context());
  h.pushOn(1, [record('k', 'v', 0)]);
  assert.deepEqual(h.logs, [
    { level: 'warn', message: 'batch of 1 on {"port":1}' },
    { level: 'debug', message: '1n' },
  ]);
});

test('pushBatchEncoded returns the batches exactly as the host receives them', () => {
  const h = new Harness(Total, new Context());
  const batches = h.pushBatchEncoded(encodeBatch(0, [record('a', 'x', 1)]));
  assert.deepEqual(batches, [encodeBatch(0, [record('a', 'partial', 1), record('a', '1', 1)])]);
});

test('the harness refuses an operator that emits where the ABI forbids it', () => {
  class EmitsLate extends Operator {
    process(batch, out) {
      this._out = out;
    }
    checkpointComplete() {
      this._out.emit('k', 'v', 0);
    }
  }
  const h = new Harness(EmitsLate, new Context());
  h.push('k');
  assert.throws(() => h.checkpointComplete(1), { name: 'OperatorError', message: /Output.emit was called after the operator method/ });
});

test('assertRestorePreservesOutput passes for JSON state and catches state that is lost', () => {
  const input = Array.from({ length: 7 }, (_, i) => record('k', 'ab'.repeat(i), i));
  for (let every = 1; every <= 3; every++) assertRestorePreservesOutput(Total, new Context(), input, every);
  class Forgetful extends Operator {
    constructor(ctx) {
      super(ctx);
      this._seen = 0; // a cache name: not in the snapshot
    }
    process(batch, out) {
      for (const { key, timestamp } of batch) out.emit(key, String(++this._seen), timestamp);
    }
  }
  assert.throws(
    () => assertRestorePreservesOutput(Forgetful, new Context(), input.slice(0, 4), 2),
    { name: 'AssertionError', message: /^the output changes when the operator is restored into a fresh instance after every 2 record\(s\)\nrecords differ at index 2/ },
  );
  assert.throws(() => assertRestorePreservesOutput(Total, new Context(), input, 0), { message: /every must be an integer of at least 1/ });
});

test('assertRestorePreservesOutput compares side outputs too', () => {
  class SideForgets extends Operator {
    constructor(ctx) {
      super(ctx);
      this._n = 0;
    }
    process(batch, out) {
      for (const { key, timestamp } of batch) out.emitTo('side', key, String(++this._n), timestamp);
    }
  }
  assert.throws(
    () => assertRestorePreservesOutput(SideForgets, new Context(), [record('a'), record('b')], 1),
    { name: 'AssertionError', message: /^side output `side` changes/ },
  );
});

test('assertRecordsEqual shows keys and values as text, or hex when they are not', () => {
  assertRecordsEqual([record('a', '1', 1)], [record('a', '1', 1)]);
  assert.throws(
    () => assertRecordsEqual([record(new Uint8Array([0xff, 0]), '1', 1n)], [record('a', '1', 2n ** 60n)]),
    { name: 'AssertionError', message: /records differ at index 0 \(actual: 1 records, expected: 1\)\n  actual: \(0xff00, "1", 1\)\n  expected: \("a", "1", 1152921504606846976n\)/ },
  );
  assert.throws(() => assertRecordsEqual([], [record('a')]), { message: /\(no record\)/ });
});

test('the emulated host refuses imports where the ABI forbids them, whatever guest calls them', () => {
  // A stand-in for a component built with another SDK: it calls the host's imports directly.
  const rogue = {
    newGuest: (host) => ({
      operator: null,
      init() {},
      process(bytes) {
        if (bytes.length === 8) host.emitTo('', encodeBatch(0, []));
      },
      checkpointComplete() {
        host.emit(encodeBatch(0, [record('k')]));
      },
      finish() {
        host.timerSet(EVENT_TIME, 1n, new Uint8Array(0));
      },
      onWatermark() {},
      onTimers() {},
      snapshot: () => new Uint8Array(0),
      restore() {},
    }),
  };
  const h = new Harness(rogue, new Context());
  assert.throws(() => h.checkpointComplete(1), { name: 'WeirError', message: 'emit is not allowed during checkpointComplete (docs/ABI.md §4)' });
  assert.throws(() => h.pushBatch(encodeBatch(0, [])), { message: /emit-to: a side output name of 0 bytes/ });
  assert.throws(() => h.finish(), { message: 'timer-set is not allowed during finish (docs/ABI.md §4)' });
});
