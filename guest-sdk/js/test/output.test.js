// Tests of src/output.js: batching, flushing, side outputs, timers and the rules of the ABI.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { EVENT_TIME, NO_WATERMARK, PROCESSING_TIME } from '../index.js';
import { decodeBatch } from '../src/batch.js';
import { BEGIN, DISCARD, END, FLUSH, FLUSH_AT, Output } from '../src/output.js';
import { record } from '../testing.js';

/** A host that records every call. */
function recordingHost() {
  const calls = [];
  return {
    calls,
    emit: (batch) => calls.push(['emit', decodeBatch(batch.slice(), 'b')]),
    emitTo: (name, batch) => calls.push(['emitTo', name, decodeBatch(batch.slice(), 'b')]),
    timerSet: (domain, timestamp, key) => calls.push(['timerSet', domain, timestamp, [...key]]),
    timerDelete: (domain, timestamp, key) => calls.push(['timerDelete', domain, timestamp, [...key]]),
    currentTime: (domain) => (domain === EVENT_TIME ? 2n ** 63n : 1700000000000n),
    log: () => {},
  };
}

function output(call = 'process') {
  const host = recordingHost();
  const out = new Output(host);
  out[BEGIN](call);
  return { host, out };
}

test('records wait for the end of the call, then go as one batch per output, main first', () => {
  const { host, out } = output();
  out.emit('a', '1', 1);
  out.emitTo('late', 'b', '2', 2);
  out.emit(new Uint8Array([0]), new Uint8Array(0), -5n);
  out.emitTo('other', 'c', '3', 3);
  out.emitTo('late', 'd', '4', 4);
  assert.deepEqual(host.calls, []);
  out[FLUSH]();
  assert.deepEqual(host.calls, [
    ['emit', { port: 0, records: [record('a', '1', 1), record(new Uint8Array([0]), '', -5)] }],
    ['emitTo', 'late', { port: 0, records: [record('b', '2', 2), record('d', '4', 4)] }],
    ['emitTo', 'other', { port: 0, records: [record('c', '3', 3)] }],
  ]);
  out[FLUSH]();
  assert.equal(host.calls.length, 3, 'nothing more to hand on');
});

test('a batch that reaches FLUSH_AT (1 MiB) is handed on at once', () => {
  const { host, out } = output();
  const value = new Uint8Array(300 * 1024);
  for (let ts = 0; ts < 4; ts++) out.emit('k', value, ts);
  assert.equal(FLUSH_AT, 1 << 20);
  assert.equal(host.calls.length, 1, 'the 4th record takes the batch past 1 MiB');
  assert.equal(host.calls[0][1].records.length, 4);
  out.emitTo('side', 'k', new Uint8Array(FLUSH_AT), 9);
  assert.equal(host.calls.length, 2);
  assert.equal(host.calls[1][1], 'side');
});

test('a failed call drops what it emitted', () => {
  const { host, out } = output();
  out.emit('a', '1', 1);
  out.emitTo('s', 'a', '1', 1);
  out[DISCARD]();
  out[FLUSH]();
  assert.deepEqual(host.calls, []);
});

test('records that are no records are refused', () => {
  const { out } = output();
  assert.throws(() => out.emit(1, 'v', 0), { name: 'WeirError', message: 'the key must be a Uint8Array or a string, not a number' });
  assert.throws(() => out.emit('k', [1], 0), { message: 'the value must be a Uint8Array or a string, not an Array' });
  assert.throws(() => out.emit('k', 'v', 0.5), { message: /the timestamp must be an integer/ });
  assert.throws(() => out.emit('k', 'v', undefined), { message: /the timestamp must be a Number or a BigInt, not undefined/ });
});

test('side output names are 1 to 255 bytes of UTF-8', () => {
  const { out } = output();
  assert.throws(() => out.emitTo('', 'k', 'v', 0), { name: 'WeirError', message: /name `` is 0 bytes long; names are 1 to 255/ });
  assert.throws(() => out.emitTo('é'.repeat(128), 'k', 'v', 0), { message: /is 256 bytes long/ });
  assert.throws(() => out.emitTo(5, 'k', 'v', 0), { message: /must be a string, not a number/ });
  out.emitTo('n'.repeat(255), 'k', 'v', 0);
});

test('timers go to the host as domain codes and BigInts, keys as bytes', () => {
  const { host, out } = output('onTimers');
  out.setTimer(EVENT_TIME, 10, 'k');
  out.deleteTimer(PROCESSING_TIME, 2n ** 62n, new Uint8Array([1]));
  assert.deepEqual(host.calls, [
    ['timerSet', 0, 10n, [0x6b]],
    ['timerDelete', 1, 2n ** 62n, [1]],
  ]);
});

test('timers are refused in finish, for an unknown domain, and before 1970', () => {
  const { out } = output('finish');
  assert.throws(() => out.setTimer(EVENT_TIME, 1, 'k'), { name: 'WeirError', message: /setTimer is not allowed in finish/ });
  out.emit('k', 'v', 1);
  const { out: during } = output('onWatermark');
  assert.throws(() => during.setTimer(2, 1, 'k'), { message: /domain must be EVENT_TIME \(0\) or PROCESSING_TIME \(1\), not 2/ });
  assert.throws(() => during.deleteTimer(EVENT_TIME, -1, 'k'), { message: /timestamp -1 is negative, and componentize-js 0.23.0 cannot pass a negative s64/ });
  assert.throws(() => during.setTimer(EVENT_TIME, 1, 7), { message: /the key must be a Uint8Array or a string/ });
});

test('an Output kept past its call refuses to be used', () => {
  const { out } = output();
  out[END]();
  assert.throws(() => out.emit('k', 'v', 0), { name: 'WeirError', message: /Output.emit was called after the operator method it was given to returned/ });
  assert.throws(() => out.setTimer(EVENT_TIME, 0, 'k'), { message: /Output.setTimer was called after/ });
});

test('the clocks read the host, as signed timestamps', () => {
  const { out } = output();
  assert.equal(out.watermark(), NO_WATERMARK, 'read back as signed when the bindings give it unsigned');
  assert.equal(out.processingTime(), 1700000000000);
});
