// Why this module exists: record keys and values are bytes, but JavaScript objects, Maps and
// JSON want strings. These helpers convert between the two without a per-byte loop in JS
// where a built-in can do the work (the engine inside a component is an interpreter).

import { WeirError } from './errors.js';

const encoder = new TextEncoder();
const strictDecoder = new TextDecoder('utf-8', { fatal: true });

/** Bytes per `String.fromCharCode.apply` call: well under every engine's argument limit. */
const CHUNK = 8192;

/**
 * The bytes as a string of the same length, one character U+0000–U+00FF per byte (a "binary"
 * or latin1 string). Equal bytes give equal strings and different bytes different ones, so the
 * result is a key for an object or a `Map`, and it survives JSON (the default snapshot): use it
 * to keep state per record key. {@link keyBytes} gives the bytes back.
 *
 * @param {Uint8Array} bytes
 * @returns {string}
 */
export function bytesKey(bytes) {
  if (!(bytes instanceof Uint8Array)) {
    throw new WeirError(`bytesKey: expected a Uint8Array, got ${describeType(bytes)}`);
  }
  if (bytes.length <= CHUNK) {
    return String.fromCharCode.apply(null, bytes);
  }
  let text = '';
  for (let at = 0; at < bytes.length; at += CHUNK) {
    text += String.fromCharCode.apply(null, bytes.subarray(at, at + CHUNK));
  }
  return text;
}

/**
 * The bytes a {@link bytesKey} string stands for. Throws a `WeirError` for a string with a
 * character above U+00FF, which no bytes give.
 *
 * @param {string} key
 * @returns {Uint8Array}
 */
export function keyBytes(key) {
  if (typeof key !== 'string') {
    throw new WeirError(`keyBytes: expected a string, got ${describeType(key)}`);
  }
  const bytes = new Uint8Array(key.length);
  for (let i = 0; i < key.length; i++) {
    const code = key.charCodeAt(i);
    if (code > 0xff) {
      throw new WeirError(
        `keyBytes: character ${i} of the key is U+${code.toString(16).toUpperCase().padStart(4, '0')}; ` +
          'a bytesKey string has only characters U+0000 to U+00FF',
      );
    }
    bytes[i] = code;
  }
  return bytes;
}

/**
 * The UTF-8 encoding of `text`.
 *
 * @param {string} text
 * @returns {Uint8Array}
 */
export function utf8(text) {
  if (typeof text !== 'string') {
    throw new WeirError(`utf8: expected a string, got ${describeType(text)}`);
  }
  return encoder.encode(text);
}

/**
 * The bytes decoded as UTF-8. Throws a `WeirError` when they are not UTF-8, rather than
 * replacing what does not decode.
 *
 * @param {Uint8Array} bytes
 * @returns {string}
 */
export function text(bytes) {
  if (!(bytes instanceof Uint8Array)) {
    throw new WeirError(`text: expected a Uint8Array, got ${describeType(bytes)}`);
  }
  try {
    return strictDecoder.decode(bytes);
  } catch {
    throw new WeirError(`text: the ${bytes.length} bytes are not UTF-8`);
  }
}

/**
 * Bytes that came through the component bindings, as a Uint8Array of this realm: the
 * bindings of componentize-js run in a realm of their own, so the arrays they pass fail
 * `instanceof Uint8Array` here. The view shares their memory; nothing is copied.
 *
 * @param {Uint8Array} bytes a Uint8Array of any realm
 * @param {string} what the argument, for the message when it is no Uint8Array
 * @returns {Uint8Array}
 */
export function hostBytes(bytes, what) {
  if (Object.prototype.toString.call(bytes) !== '[object Uint8Array]') {
    throw new WeirError(`${what} must be bytes, not ${describeType(bytes)}`);
  }
  return bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/**
 * `value` as bytes for a record: a `Uint8Array` as it is, a string as its UTF-8 encoding.
 *
 * @param {Uint8Array | string} value
 * @param {string} what the argument, for the message when it is neither
 * @returns {Uint8Array}
 */
export function toBytes(value, what) {
  if (value instanceof Uint8Array) return value;
  if (typeof value === 'string') return encoder.encode(value);
  throw new WeirError(`${what} must be a Uint8Array or a string, not ${describeType(value)}`);
}

/**
 * The type of `value` in words, for messages: `a number`, `a Map`, `null`.
 *
 * @param {unknown} value
 * @returns {string}
 */
export function describeType(value) {
  if (value === null) return 'null';
  if (value === undefined) return 'undefined';
  if (typeof value === 'function') return 'a function';
  if (typeof value === 'object') {
    const name = Object.getPrototypeOf(value)?.constructor?.name;
    return name ? withArticle(name) : 'an object without a prototype';
  }
  return withArticle(typeof value);
}

/** `word` after `a` or `an`. */
function withArticle(word) {
  return `${/^[aeio]/i.test(word) ? 'an' : 'a'} ${word}`;
}
