// Tests of src/guest.js, src/wit.js and src/log.js: the `guest` exports as the component runs
// them — their order, how failures become the host's message, and what crosses the bindings.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Context, Operator, WeirError, log } from '../index.js';
import { makeGuest, operatorClassOf } from '../src/guest.js';
import { hostOf } from '../src/wit.js';
import { initMessage } from '../src/context.js';
import { encodeBatch, record } from '../testing.js';

/** A host that keeps emitted batches and log lines; the watermark is given modulo 2^64. */
function host() {
  return {
    emitted: [],
    logs: [],
    emit(batch) {
      this.emitted.push(batch.slice());
    },
    emitTo() {},
    timerSet() {},
    timerDelete() {},
    currentTime: () => 2n ** 64n - 10n,
    log(level, message) {
      this.logs.push([level, message]);
    },
  };
}

class Echo extends Operator {
  process(batch, out) {
    this.port = batch.port;
    for (const { key, value, timestamp } of batch) {
      if (value.length === 4 && new TextDecoder().decode(value) === 'boom') throw new Error(`boom at ${timestamp}`);
      out.emit(key, value, timestamp);
    }
  }

  onWatermark(watermark, out) {
    out.emit('wm', String(watermark), 0);
    log.info('watermark', watermark, { at: out.watermark() });
  }

  checkpointComplete(id) {
    this.completed = id;
  }
}

function guest(OperatorClass = Echo, h = host()) {
  const g = makeGuest(OperatorClass, h);
  g.init(initMessage(new Context('echo', { config: 'cfg' })));
  return { g, h };
}

test('init makes the instance from the init message', () => {
  class Configured extends Operator {
    constructor(ctx) {
      super(ctx);
      this.seen = [ctx.operator, ctx.subtask, ctx.parallelism, ctx.configString()];
    }
    process() {}
  }
  const g = makeGuest(Configured, host());
  g.init({ operator: 'op', subtask: 2, parallelism: 3, config: new TextEncoder().encode('x=1') });
  assert.deepEqual(g.operator.seen, ['op', 2, 3, 'x=1']);
});

test('process decodes the batch, and hands the host one batch at the end', () => {
  const { g, h } = guest();
  g.process(encodeBatch(4, [record('a', 'x', 1), record('b', 'y', 2)]));
  assert.equal(g.operator.port, 4);
  assert.deepEqual(h.emitted, [encodeBatch(0, [record('a', 'x', 1), record('b', 'y', 2)])]);
});

test('an exception fails the call with a string: its name, message and stack; output is dropped', () => {
  const { g, h } = guest();
  assert.throws(
    () => g.process(encodeBatch(0, [record('a', 'x', 1), record('a', 'boom', 2)])),
    (thrown) => {
      assert.equal(typeof thrown, 'string');
      assert.match(thrown, /^Error: boom at 2\n/);
      assert.match(thrown, /process/, 'the stack names the method');
      assert.match(thrown, /guest\.test\.js:\d+/, 'and the file and line');
      return true;
    },
  );
  assert.deepEqual(h.emitted, []);
});

test('a thrown non-Error is reported as it is', () => {
  class Throws extends Operator {
    process() {
      throw 42;
    }
  }
  const { g } = guest(Throws);
  assert.throws(() => g.process(encodeBatch(0, [])), (thrown) => thrown === 'uncaught number: 42');
});

test('a failed instance refuses every later call, as the host never calls it again', () => {
  const { g } = guest();
  assert.throws(() => g.process(new Uint8Array(3)), /malformed input batch/);
  assert.throws(() => g.process(encodeBatch(0, [])), (thrown) => /process: the instance already failed \(WeirError: malformed input batch/.test(thrown));
});

test('the order of calls is enforced: init first and once, restore only right after init', () => {
  const g = makeGuest(Echo, host());
  assert.throws(() => g.process(encodeBatch(0, [])), (t) => t === 'process was called before init');
  const { g: twice } = guest();
  assert.throws(() => twice.init(initMessage(new Context())), /init was called twice/);
  const { g: late } = guest();
  late.process(encodeBatch(0, []));
  assert.throws(() => late.restore(new Uint8Array(0)), /restore is only allowed right after init/);
  const { g: early } = guest();
  early.restore(new TextEncoder().encode('{"port":9}'));
  assert.equal(early.operator.port, 9);
  assert.throws(() => early.restore(new Uint8Array(0)), /restore is only allowed right after init/);
});

test('methods must be synchronous', () => {
  class Async extends Operator {
    async process() {}
  }
  const { g } = guest(Async);
  assert.throws(() => g.process(encodeBatch(0, [])), /process returned a Promise: operator methods must be synchronous/);
});

test('snapshot returns the operator\'s bytes, and refuses anything else', () => {
  const { g } = guest();
  g.process(encodeBatch(2, []));
  assert.equal(new TextDecoder().decode(g.snapshot(1n)), '{"port":2}');
  class Bad extends Operator {
    process() {}
    snapshot() {
      return 'text';
    }
  }
  assert.throws(() => guest(Bad).g.snapshot(1n), /snapshot\(\) must return a Uint8Array, not a string/);
});

test('s64 and u64 from the bindings are read right: watermarks signed, checkpoint ids as Numbers', () => {
  const { g, h } = guest();
  g.onWatermark(2n ** 64n - 1n);
  assert.deepEqual(h.emitted, [encodeBatch(0, [record('wm', '-1', 0)])]);
  g.checkpointComplete(7n);
  assert.equal(g.operator.completed, 7);
});

test('log lines go to the host\'s log during a call: parts joined, non-strings as JSON', () => {
  const { g, h } = guest();
  g.onWatermark(5n);
  assert.deepEqual(h.logs, [['info', 'watermark 5 {"at":-10}']]);
});

test('the operator class is the default export, or else the one exported subclass', () => {
  class A extends Operator {}
  class B extends Operator {}
  assert.equal(operatorClassOf({ default: A, B }, 'm.js'), A);
  assert.equal(operatorClassOf({ A, helper: () => 1, value: 3 }, 'm.js'), A);
  assert.throws(() => operatorClassOf({ A, B }, 'm.js'), { name: 'WeirError', message: /m.js exports several subclasses of Operator \(A, B\)/ });
  assert.throws(() => operatorClassOf({ x: 1 }, 'm.js'), { message: /m.js exports no subclass of Operator/ });
  assert.throws(() => operatorClassOf({ default: class {} }, 'm.js'), { message: /the default export of m.js is a function, not a subclass of Operator/ });
  assert.throws(() => makeGuest({}, host()), WeirError);
});

test('an Operator without process fails its first batch with a message', () => {
  class Empty extends Operator {}
  assert.throws(() => guest(Empty).g.process(encodeBatch(0, [])), /Empty does not implement process\(batch, out\)/);
});

test('the WIT adapter names time domains as the WIT enum does', () => {
  const calls = [];
  const wit = Object.fromEntries(
    ['emit', 'emitTo', 'timerSet', 'timerDelete', 'currentTime', 'log'].map((name) => [name, (...args) => (calls.push([name, ...args]), 0n)]),
  );
  const h = hostOf(wit);
  h.timerSet(0, 5n, new Uint8Array(0));
  h.timerDelete(1, 6n, new Uint8Array(0));
  h.currentTime(0);
  h.currentTime(1);
  h.emitTo('s', new Uint8Array(8));
  h.log('warn', 'm');
  assert.deepEqual(calls.map((c) => c.slice(0, 3)), [
    ['timerSet', 'event', 5n],
    ['timerDelete', 'processing', 6n],
    ['currentTime', 'event'],
    ['currentTime', 'processing'],
    ['emitTo', 's', new Uint8Array(8)],
    ['log', 'warn', 'm'],
  ]);
});

test('Context checks what it is given, and configString refuses config that is not UTF-8', () => {
  assert.throws(() => new Context('x', { subtask: 2, parallelism: 2 }), { name: 'WeirError', message: /subtask 2 is not below the parallelism 2/ });
  assert.throws(() => new Context('x', { parallelism: -1 }), { message: /parallelism must be an integer/ });
  assert.throws(() => new Context(5), { message: /operator name must be a string/ });
  assert.throws(() => new Context('x', { config: new Uint8Array([0xff]) }).configString(), { message: /config of operator `x` is not UTF-8/ });
  assert.deepEqual(new Context('x', { config: 'é' }).config, new Uint8Array([0xc3, 0xa9]));
});
