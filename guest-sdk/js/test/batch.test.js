// Tests of src/batch.js and src/time.js: the batch layout of docs/ABI.md §5 and i64 timestamps.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { END_OF_TIME, NO_WATERMARK } from '../index.js';
import { BatchWriter, decodeBatch, decodeTimers } from '../src/batch.js';
import { checkTimestamp, readTimestamp, timestampFromBigInt, writeTimestamp } from '../src/time.js';
import { encodeBatch, record } from '../testing.js';

/** The example of docs/ABI.md §5: key "a", value "xy", timestamp 5, port 1 (27 bytes). */
const EXAMPLE = new Uint8Array([
  1, 0, 0, 0, 1, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 0x61, 0x78, 0x79,
]);

test('decodes the example batch of docs/ABI.md §5', () => {
  const { port, records } = decodeBatch(EXAMPLE, 'input batch');
  assert.equal(port, 1);
  assert.deepEqual(records, [record('a', 'xy', 5)]);
  assert.deepEqual(encodeBatch(1, records), EXAMPLE);
});

test('keys and values are views of the batch, not copies', () => {
  const { records } = decodeBatch(EXAMPLE, 'input batch');
  assert.equal(records[0].key.buffer, EXAMPLE.buffer);
  assert.equal(records[0].value.byteOffset, 25);
});

test('decodes a batch that is a view into a larger buffer', () => {
  const larger = new Uint8Array(EXAMPLE.length + 10);
  larger.set(EXAMPLE, 5);
  assert.deepEqual(decodeBatch(larger.subarray(5, 5 + EXAMPLE.length), 'b').records, [record('a', 'xy', 5)]);
});

test('an empty batch is valid', () => {
  assert.deepEqual(decodeBatch(encodeBatch(3, []), 'b'), { port: 3, records: [] });
});

test('malformed batches are refused whole, with what is wrong', () => {
  const cases = [
    [new Uint8Array(7), /7 bytes, shorter than its 8-byte header/],
    [new Uint8Array([2, 0, 0, 0, 0, 0, 0, 0, ...new Uint8Array(16)]), /2 records cannot fit in 24 bytes/],
    [new Uint8Array([0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]), /4294967295 records cannot fit/],
    [EXAMPLE.subarray(0, 26), /record 0 needs 19 bytes at offset 8, but the batch has 18 left/],
    [new Uint8Array([...EXAMPLE, 0]), /1 bytes left over after its 1 records/],
    [new Uint8Array([2, 0, 0, 0, 0, 0, 0, 0, ...EXAMPLE.subarray(8), ...new Uint8Array(15)]), /record 1 needs 16 bytes at offset 27/],
  ];
  for (const [bytes, message] of cases) {
    assert.throws(() => decodeBatch(bytes, 'input batch'), { name: 'WeirError', message });
  }
});

test('timestamps round-trip exactly: Numbers when safe, BigInts beyond', () => {
  const view = new DataView(new ArrayBuffer(8));
  const values = [
    0, 1, -1, 5, 2 ** 32, -(2 ** 32), 2 ** 32 - 1, -(2 ** 31), Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER,
    2n ** 53n, -(2n ** 53n), 2n ** 53n + 1n, NO_WATERMARK, NO_WATERMARK + 1n, END_OF_TIME, END_OF_TIME - 1n,
  ];
  for (const value of values) {
    writeTimestamp(view, 0, value);
    assert.equal(view.getBigInt64(0, true), BigInt(value), `writing ${value}`);
    const read = readTimestamp(view, 0);
    assert.equal(read, value, `reading ${value}`);
    assert.equal(typeof read, Number.isSafeInteger(Number(value)) ? 'number' : 'bigint', `the type of ${value}`);
  }
});

test('timestampFromBigInt reads an i64 given modulo 2^64, as the component bindings give it', () => {
  assert.equal(timestampFromBigInt(2n ** 64n - 1n), -1);
  assert.equal(timestampFromBigInt(2n ** 63n), NO_WATERMARK);
  assert.equal(timestampFromBigInt(END_OF_TIME), END_OF_TIME);
  assert.equal(timestampFromBigInt(5n), 5);
});

test('checkTimestamp refuses what is no exact i64', () => {
  for (const [value, message] of [
    [1.5, /must be an integer number of milliseconds, not 1.5/],
    [2 ** 53, /past 2\^53 as a Number.*pass it as a BigInt/],
    [NaN, /not NaN/],
    [2n ** 63n, /outside the i64 range/],
    ['5', /must be a Number or a BigInt, not a string/],
  ]) {
    assert.throws(() => checkTimestamp(value, 'the timestamp'), { name: 'WeirError', message });
  }
});

test('the writer encodes strings as UTF-8, grows past its first buffer and is reused after clear', () => {
  const writer = new BatchWriter();
  writer.push('ké', new Uint8Array([1, 2]), -3);
  const big = 'x'.repeat(10000);
  writer.push(new Uint8Array(0), big, END_OF_TIME);
  const { port, records } = decodeBatch(writer.bytes().slice(), 'b');
  assert.equal(port, 0);
  assert.deepEqual(records, [record('ké', new Uint8Array([1, 2]), -3), record('', big, END_OF_TIME)]);
  writer.clear();
  assert.equal(writer.isEmpty(), true);
  assert.deepEqual(decodeBatch(writer.bytes(), 'b').records, []);
});

test('fired timers decode with their domain, and a port that is no domain is refused', () => {
  const timers = decodeTimers(encodeBatch(1, [record('k', '', 10), record('j', '', 11)]));
  assert.equal(timers.domain, 1);
  assert.equal(timers.length, 2);
  assert.deepEqual([...timers], [{ key: new Uint8Array([0x6b]), timestamp: 10 }, { key: new Uint8Array([0x6a]), timestamp: 11 }]);
  assert.deepEqual(timers.get(1).timestamp, 11);
  assert.throws(() => decodeTimers(encodeBatch(2, [])), { message: /port 2 is no time domain/ });
});
