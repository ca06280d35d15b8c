// Tests of src/state.js and the Operator's default snapshot and restore: state as JSON.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Context, Operator } from '../index.js';
import { encodeState, parse, restoreState, stringify } from '../src/state.js';

const json = (bytes) => new TextDecoder().decode(bytes);

class Stateful extends Operator {
  constructor(ctx) {
    super(ctx);
    this.count = 0;
    this.names = ['a'];
    this._cache = new Map([['not', 'kept']]);
    this.added = 'default';
  }

  process() {}
}

test('the default snapshot is JSON of the own enumerable properties, without `_` names and ctx', () => {
  const operator = new Stateful(new Context('s'));
  operator.count = 3;
  assert.equal(operator.ctx.operator, 's');
  assert.equal(json(operator.snapshot()), '{"count":3,"names":["a"],"added":"default"}');
});

test('restore assigns the properties back into a fresh instance; the others keep their values', () => {
  const fresh = new Stateful(new Context('s'));
  fresh.restore(new TextEncoder().encode('{"count":7,"names":[]}'));
  assert.equal(fresh.count, 7);
  assert.deepEqual(fresh.names, []);
  assert.equal(fresh.added, 'default');
  assert.equal(fresh._cache.get('not'), 'kept');
  assert.equal(fresh.ctx.operator, 's', 'ctx is no state');
});

test('zero bytes restore nothing', () => {
  const fresh = new Stateful(new Context());
  fresh.restore(new Uint8Array(0));
  assert.equal(fresh.count, 0);
});

test('Maps, Sets, Uint8Arrays and BigInts survive, nested in each other', () => {
  const value = {
    map: new Map([['k', new Map([[1, new Set([2n ** 70n, -1n])]])], ['bytes', new Uint8Array([0, 255, 128])]]),
    list: [new Uint8Array(0), { deep: new Set(['x']) }],
    plain: { a: 1, b: [true, null, 'é'] },
  };
  const back = parse(new TextEncoder().encode(stringify(value)));
  assert.deepEqual(back, value);
});

test('an object whose own member is `$weir` is not mistaken for a tag, and `__proto__` stays a member', () => {
  const tricky = JSON.parse('{"$weir":"map","entries":[],"__proto__":1}');
  const back = parse(new TextEncoder().encode(stringify({ tricky, inMap: new Map([['__proto__', 2]]) })));
  assert.deepEqual(Object.keys(back.tricky), ['$weir', 'entries', '__proto__']);
  assert.equal(Object.getPrototypeOf(back.tricky), Object.prototype);
  assert.equal(back.tricky.__proto__, 1);
  assert.equal(back.inMap.get('__proto__'), 2);
});

test('what JSON would lose is refused, naming the property', () => {
  class Point {}
  for (const [value, message] of [
    [{ when: new Date(0) }, /property `when` is a Date, which would come back from JSON as something else/],
    [{ p: new Point() }, /property `p` is a Point, which the default snapshot cannot hold/],
    [{ f: () => 1 }, /property `f` is a function/],
    [{ n: NaN }, /property `n` is NaN/],
    [{ n: [Infinity] }, /property `0` is Infinity/],
    [{ s: Symbol('s') }, /property `s` is a symbol/],
    [{ u: new Uint16Array(1) }, /property `u` is a Uint16Array/],
  ]) {
    assert.throws(() => stringify(value), { name: 'WeirError', message });
  }
});

test('a snapshot that does not decode is refused with a message', () => {
  const operator = new Stateful(new Context());
  for (const [bytes, message] of [
    [new TextEncoder().encode('this is no snapshot'), /the snapshot does not decode/],
    [new Uint8Array([0xff]), /not UTF-8 JSON/],
    [new TextEncoder().encode('[1]'), /not a JSON object of properties/],
    [new TextEncoder().encode('{"x":{"$weir":"unknown"}}'), /unknown tag "unknown"/],
    [new TextEncoder().encode('{"x":{"$weir":"map","keys":5}}'), /the snapshot does not decode/],
    [new TextEncoder().encode('{"x":{"$weir":"map","keys":[1],"values":[]}}'), /keys` and `values` of one length/],
    [new TextEncoder().encode('{"__proto__":{}}'), /names the property `__proto__`/],
  ]) {
    assert.throws(() => restoreState(operator, bytes), { name: 'WeirError', message });
  }
});

test('encodeState and restoreState are what Operator uses, and can be overridden', () => {
  class Custom extends Operator {
    process() {}
    snapshot() {
      return new Uint8Array([42]);
    }
    restore(bytes) {
      this.restored = bytes[0];
    }
  }
  const custom = new Custom(new Context());
  assert.deepEqual(custom.snapshot(), new Uint8Array([42]));
  custom.restore(new Uint8Array([7]));
  assert.equal(custom.restored, 7);
  const plain = new Stateful(new Context());
  assert.deepEqual(plain.snapshot(), encodeState(plain));
});
