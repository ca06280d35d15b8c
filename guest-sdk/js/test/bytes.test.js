// Tests of src/bytes.js: bytes as keys, UTF-8, and bytes from another realm.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import vm from 'node:vm';
import { WeirError, bytesKey, keyBytes, text, utf8 } from '../index.js';
import { describeType, hostBytes, toBytes } from '../src/bytes.js';

test('bytesKey gives one character per byte and keyBytes gives the bytes back, for all 256 bytes', () => {
  const all = Uint8Array.from({ length: 256 }, (_, i) => i);
  const key = bytesKey(all);
  assert.equal(key.length, 256);
  assert.equal(key.charCodeAt(0), 0);
  assert.equal(key.charCodeAt(255), 255);
  assert.deepEqual(keyBytes(key), all);
});

test('bytesKey of a key longer than one chunk (8192 bytes) is whole', () => {
  const long = Uint8Array.from({ length: 20000 }, (_, i) => (i * 7) & 0xff);
  const key = bytesKey(long);
  assert.equal(key.length, 20000);
  assert.deepEqual(keyBytes(key), long);
});

test('bytesKey strings survive JSON and tell different bytes apart', () => {
  const keys = [new Uint8Array(0), new Uint8Array([0]), new Uint8Array([0, 0]), new Uint8Array([0xff, 0, 0x80])];
  const strings = keys.map(bytesKey);
  assert.equal(new Set(strings).size, keys.length);
  assert.deepEqual(JSON.parse(JSON.stringify(strings)).map(keyBytes), keys);
});

test('keyBytes refuses characters above U+00FF, and both refuse the wrong types', () => {
  assert.throws(() => keyBytes('a\u0100'), { name: 'WeirError', message: /character 1 of the key is U\+0100/ });
  assert.throws(() => bytesKey('abc'), { name: 'WeirError', message: /expected a Uint8Array, got a string/ });
  assert.throws(() => keyBytes(new Uint8Array(1)), WeirError);
});

test('utf8 and text convert UTF-8, and text refuses bytes that are not UTF-8', () => {
  assert.deepEqual(utf8('héllo'), new Uint8Array([104, 0xc3, 0xa9, 108, 108, 111]));
  assert.equal(text(utf8('héllo ☃')), 'héllo ☃');
  assert.throws(() => text(new Uint8Array([0xff])), { name: 'WeirError', message: /not UTF-8/ });
});

test('toBytes takes bytes as they are and strings as UTF-8, and names what else it got', () => {
  const bytes = new Uint8Array([1, 2]);
  assert.equal(toBytes(bytes, 'the key'), bytes);
  assert.deepEqual(toBytes('é', 'the key'), new Uint8Array([0xc3, 0xa9]));
  assert.throws(() => toBytes(5, 'the key'), { message: 'the key must be a Uint8Array or a string, not a number' });
  assert.throws(() => toBytes([1], 'the key'), { message: /not an Array/ });
});

test('hostBytes makes a Uint8Array of another realm a view of this one, sharing its memory', () => {
  const foreign = vm.runInNewContext('new Uint8Array([9, 8, 7, 6]).subarray(1, 3)');
  assert.equal(foreign instanceof Uint8Array, false, 'the test needs a foreign array');
  const here = hostBytes(foreign, 'the batch');
  assert.equal(here instanceof Uint8Array, true);
  assert.deepEqual([...here], [8, 7]);
  here[0] = 1;
  assert.equal(foreign[0], 1, 'no copy');
  const own = new Uint8Array(2);
  assert.equal(hostBytes(own, 'the batch'), own);
  assert.throws(() => hostBytes([1, 2], 'the batch'), { message: 'the batch must be bytes, not an Array' });
});

test('describeType names values for messages', () => {
  assert.deepEqual(
    [null, undefined, 1, 1n, 'x', () => 1, new Map(), Object.create(null), {}, new Uint8Array(0)].map(describeType),
    ['null', 'undefined', 'a number', 'a bigint', 'a string', 'a function', 'a Map', 'an object without a prototype', 'an Object', 'a Uint8Array'],
  );
});
