// Why this module exists: an operator's state is checkpointed with no code of its own — as
// JSON of its own enumerable properties (names starting with `_` left out, for caches). Plain
// JSON would silently turn a Map into `{}` and a Uint8Array into an object of digits, and
// refuse a BigInt; this codec writes those as tagged JSON objects and reads them back, and
// refuses loudly what JSON cannot carry rather than losing it.
//
// Tagged values are objects with a `$weir` member: {"$weir":"map","keys":[...],"values":[...]},
// {"$weir":"set","values":[...]}, {"$weir":"bytes","base64":"..."}, {"$weir":"bigint",
// "value":"-12"}; a plain object of the state that has its own `$weir` member is written as
// {"$weir":"object","entries":[[name,value],...]} so that it is never mistaken for a tag.

import { WeirError } from './errors.js';
import { bytesKey, describeType, keyBytes } from './bytes.js';

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

const TAG = '$weir';

/**
 * The names of the properties of `operator` that its default snapshot holds: its own
 * enumerable string-keyed properties, except those whose name starts with `_`.
 *
 * @param {object} operator
 * @returns {string[]}
 */
export function stateNames(operator) {
  return Object.keys(operator).filter((name) => !name.startsWith('_'));
}

/**
 * The default snapshot of `operator`: UTF-8 JSON of an object holding its state properties
 * ({@link stateNames}), with Maps, Sets, Uint8Arrays and BigInts tagged.
 *
 * @param {object} operator
 * @returns {Uint8Array}
 */
export function encodeState(operator) {
  const names = stateNames(operator);
  // No state of its own (all of it on the host, in ValueState): an empty snapshot, which the
  // host can rescale.
  if (names.length === 0) return new Uint8Array(0);
  const state = Object.create(null);
  for (const name of names) {
    state[name] = operator[name];
  }
  return encoder.encode(stringify(state));
}

/**
 * Assigns back to `operator` what {@link encodeState} wrote. Properties the snapshot does not
 * name keep the values the constructor gave them. Zero bytes restore nothing.
 *
 * @param {object} operator
 * @param {Uint8Array} bytes
 */
export function restoreState(operator, bytes) {
  if (bytes.length === 0) return;
  const state = parse(bytes);
  if (state === null || typeof state !== 'object' || Array.isArray(state)) {
    throw new WeirError('the snapshot does not decode: it is not a JSON object of properties');
  }
  for (const name of Object.keys(state)) {
    if (name === '__proto__') {
      throw new WeirError('the snapshot does not decode: it names the property `__proto__`');
    }
    operator[name] = state[name];
  }
}

/**
 * JSON of `value` with the tags described at the top of this module.
 *
 * @param {unknown} value
 * @returns {string}
 */
export function stringify(value) {
  /** Objects this replacer made: their members are written as they are. */
  const made = new WeakSet();
  return JSON.stringify(value, function replace(name, item) {
    if (made.has(this)) return item;
    const where = name === '' ? 'the state' : `property \`${name}\``;
    const original = this[name];
    if (original !== item && typeof original === 'object' && original !== null) {
      // JSON.stringify called its toJSON: a Date, say, would come back as a string.
      throw new WeirError(
        `${where} is ${describeType(original)}, which would come back from JSON as something ` +
          'else: keep plain data, or override snapshot() and restore()',
      );
    }
    switch (typeof item) {
      case 'string':
      case 'boolean':
        return item;
      case 'number':
        if (Number.isFinite(item)) return item;
        throw new WeirError(`${where} is ${item}, which JSON cannot hold: override snapshot()`);
      case 'bigint':
        return tagged(made, { [TAG]: 'bigint', value: item.toString() });
      case 'undefined':
        return item; // left out of objects, as JSON does; the constructor's value stays
      case 'object':
        break;
      default:
        throw new WeirError(`${where} is ${describeType(item)}, which a snapshot cannot hold`);
    }
    if (item === null || Array.isArray(item)) return item;
    if (item instanceof Map) {
      // Keys and values as two arrays, not an array of pairs: a pair is an object each, and a
      // state of many keys would make as many objects for the engine's bounded heap to hold.
      return tagged(made, { [TAG]: 'map', keys: Array.from(item.keys()), values: Array.from(item.values()) });
    }
    if (item instanceof Set) {
      return tagged(made, { [TAG]: 'set', values: Array.from(item) });
    }
    if (item instanceof Uint8Array) {
      return tagged(made, { [TAG]: 'bytes', base64: btoa(bytesKey(item)) });
    }
    const prototype = Object.getPrototypeOf(item);
    if (prototype !== Object.prototype && prototype !== null) {
      throw new WeirError(
        `${where} is ${describeType(item)}, which the default snapshot cannot hold ` +
          '(plain objects, arrays, strings, numbers, booleans, null, Map, Set, Uint8Array and ' +
          'BigInt it can): keep plain data, or override snapshot() and restore()',
      );
    }
    if (Object.hasOwn(item, TAG)) {
      return tagged(made, { [TAG]: 'object', entries: Object.entries(item) });
    }
    return item;
  });
}

/**
 * Reads what {@link stringify} wrote, from UTF-8 bytes.
 *
 * @param {Uint8Array} bytes
 * @returns {unknown}
 */
export function parse(bytes) {
  let json;
  try {
    json = decoder.decode(bytes);
  } catch {
    throw new WeirError('the snapshot does not decode: it is not UTF-8 JSON');
  }
  try {
    return JSON.parse(json, revive);
  } catch (error) {
    if (error instanceof WeirError) throw error;
    throw new WeirError(`the snapshot does not decode: ${error.message}`);
  }
}

/** Marks `object` as made by the replacer and returns it. */
function tagged(made, object) {
  made.add(object);
  return object;
}

/** The JSON.parse reviver: turns tagged objects back into what they stand for. */
function revive(_name, value) {
  if (value === null || typeof value !== 'object' || Array.isArray(value) || !Object.hasOwn(value, TAG)) {
    return value;
  }
  switch (value[TAG]) {
    case 'map': {
      if (!Array.isArray(value.keys) || !Array.isArray(value.values) || value.keys.length !== value.values.length) {
        throw new WeirError('the snapshot does not decode: a map needs `keys` and `values` of one length');
      }
      const map = new Map();
      for (let i = 0; i < value.keys.length; i++) map.set(value.keys[i], value.values[i]);
      return map;
    }
    case 'set':
      return new Set(value.values);
    case 'bytes':
      return keyBytes(atob(value.base64));
    case 'bigint':
      return BigInt(value.value);
    case 'object': {
      // Object.fromEntries defines each member, so even `__proto__` stays an ordinary member.
      return Object.fromEntries(value.entries);
    }
    default:
      throw new WeirError(`the snapshot does not decode: unknown tag ${JSON.stringify(value[TAG])}`);
  }
}
