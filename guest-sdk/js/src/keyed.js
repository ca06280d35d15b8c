// Why this module exists: keyed state kept on the host (docs/STATE.md, docs/ABI.md §17). A
// ValueState is one value per key kept by the host in a store beside the task rather than in
// the operator's fields: it is not capped by the component's memory, a checkpoint stores what
// changed instead of the JSON of every value, and a change of parallelism moves each key's
// value with the key, with no code in the operator. Reads and writes are batched (getMany,
// putMany): a batch of records costs two host calls however many keys it has, and a host call
// from JavaScript costs microseconds.
//
// The requests are the packed buffers of weir_abi::state (abi/src/state.rs); the harness's
// emulated host (testing.js) reads them with `reads` and `writes` as the host does. The
// key-group functions are weir_abi::key_group's, which the harness splits state with as the
// host splits its stores.

import { WeirError } from './errors.js';
import { toBytes } from './bytes.js';
import { STATE_GET, STATE_WRITE } from './output.js';

/** The longest key an entry may have: 64 KiB. */
export const MAX_KEY_BYTES = 64 * 1024;
/** The longest value an entry may have: 16 MiB. */
export const MAX_VALUE_BYTES = 16 * 1024 * 1024;
/** The length a read result gives an entry that has no value. */
const ABSENT = 0xffffffff;
const PUT = 1;
const DELETE = 0;
/** The job's max_parallelism when the job file sets none: the number of key groups. */
export const DEFAULT_MAX_PARALLELISM = 128;

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

/** The default serializer: JSON, as UTF-8. */
const JSON_SERIALIZER = {
  serialize: (value) => encoder.encode(JSON.stringify(value)),
  deserialize: (bytes) => JSON.parse(decoder.decode(bytes)),
};

/**
 * A key's 64-bit hash: FNV-1a, as weir_abi::key_group::key_hash computes it.
 *
 * @param {Uint8Array} key
 * @returns {bigint}
 */
export function keyHash(key) {
  let hash = 0xcbf29ce484222325n;
  for (const byte of key) {
    hash = BigInt.asUintN(64, (hash ^ BigInt(byte)) * 0x100000001b3n);
  }
  return hash;
}

/**
 * The key group of `key` among `maxParallelism` groups.
 *
 * @param {Uint8Array} key
 * @param {number} maxParallelism
 * @returns {number}
 */
export function keyGroup(key, maxParallelism) {
  return Number(keyHash(key) % BigInt(maxParallelism));
}

/** The subtask, of `parallelism`, that owns key group `group`. */
export function owner(group, parallelism, maxParallelism) {
  return Math.floor((group * parallelism) / maxParallelism);
}

/** The key groups subtask `subtask` of `parallelism` owns, as [start, end). */
export function groupRange(subtask, parallelism, maxParallelism) {
  const start = (i) => Math.ceil((i * maxParallelism) / parallelism);
  return [start(subtask), start(subtask + 1)];
}

/**
 * One value per key, kept on the host under a state number (0 to 65535); another ValueState of
 * the same operator must use another number. It holds no values itself, so it may be a module
 * constant; an operator whose state is all on the host has an empty snapshot, which the host
 * can rescale.
 *
 * Values are JSON by default; `serializer` may give `serialize(value) => Uint8Array` and
 * `deserialize(bytes) => value` instead. `undefined` is no value: `getMany` gives it for a key
 * that has none, and `putMany` removes a key's value when given it.
 *
 * Every method takes the call's Output: the state may be used where records may be emitted
 * (process, onTimers, onWatermark, finish).
 */
export class ValueState {
  /**
   * @param {number} state
   * @param {{ serialize: (value: any) => Uint8Array, deserialize: (bytes: Uint8Array) => any }} [serializer]
   */
  constructor(state, serializer = JSON_SERIALIZER) {
    if (!Number.isInteger(state) || state < 0 || state > 0xffff) {
      throw new WeirError(`a state number must be an integer from 0 to 65535, not ${String(state)}`);
    }
    this.state = state;
    this.serializer = serializer;
  }

  /**
   * The value of each of `keys`, in order (`undefined` where a key has none), read in one call
   * to the host.
   *
   * @param {import('./output.js').Output} out
   * @param {Iterable<Uint8Array | string>} keys
   * @returns {any[]}
   */
  getMany(out, keys) {
    const writer = new RequestWriter();
    let count = 0;
    for (const key of keys) {
      const bytes = toBytes(key, 'getMany: a key');
      writer.u16(this.state);
      writer.u32(bytes.length);
      writer.bytes(bytes);
      count++;
    }
    if (count === 0) return [];
    const result = out[STATE_GET](writer.finish());
    const view = new DataView(result.buffer, result.byteOffset, result.byteLength);
    const values = [];
    let offset = 0;
    for (let i = 0; i < count; i++) {
      if (offset + 4 > result.length) throw new WeirError("the host's state result ends early");
      const length = view.getUint32(offset, true);
      offset += 4;
      if (length === ABSENT) {
        values.push(undefined);
        continue;
      }
      const data = result.subarray(offset, offset + length);
      offset += length;
      try {
        values.push(this.serializer.deserialize(data));
      } catch (error) {
        throw new WeirError(
          `a value of state ${this.state} does not deserialize (${error}): was the state number ` +
            'used with another serializer?',
        );
      }
    }
    return values;
  }

  /** The value of `key`, or `undefined`. */
  get(out, key) {
    return this.getMany(out, [key])[0];
  }

  /**
   * Sets each key of `entries` (pairs of key and value) to its value, or removes it where the
   * value is `undefined`, in one call to the host; the last write of a key wins.
   *
   * @param {import('./output.js').Output} out
   * @param {Iterable<[Uint8Array | string, any]>} entries
   */
  putMany(out, entries) {
    const writer = new RequestWriter();
    for (const [key, value] of entries) {
      const bytes = toBytes(key, 'putMany: a key');
      writer.u8(value === undefined ? DELETE : PUT);
      writer.u16(this.state);
      writer.u32(bytes.length);
      writer.bytes(bytes);
      if (value === undefined) continue;
      const data = this.serializer.serialize(value);
      if (!(data instanceof Uint8Array)) {
        throw new WeirError(`the serializer of state ${this.state} returned no Uint8Array`);
      }
      writer.u32(data.length);
      writer.bytes(data);
    }
    if (writer.length > 0) out[STATE_WRITE](writer.finish());
  }

  /** Sets the value of `key` (`undefined` removes it). */
  put(out, key, value) {
    this.putMany(out, [[key, value]]);
  }

  /** Removes the value of `key`. */
  delete(out, key) {
    this.putMany(out, [[key, undefined]]);
  }
}

/** A growable little-endian buffer for a request. */
class RequestWriter {
  #buffer = new Uint8Array(256);
  #view = new DataView(this.#buffer.buffer);
  length = 0;

  #reserve(more) {
    if (this.length + more <= this.#buffer.length) return;
    let size = this.#buffer.length * 2;
    while (size < this.length + more) size *= 2;
    const grown = new Uint8Array(size);
    grown.set(this.#buffer.subarray(0, this.length));
    this.#buffer = grown;
    this.#view = new DataView(grown.buffer);
  }

  u8(value) {
    this.#reserve(1);
    this.#buffer[this.length++] = value;
  }

  u16(value) {
    this.#reserve(2);
    this.#view.setUint16(this.length, value, true);
    this.length += 2;
  }

  u32(value) {
    this.#reserve(4);
    this.#view.setUint32(this.length, value, true);
    this.length += 4;
  }

  bytes(bytes) {
    this.#reserve(bytes.length);
    this.#buffer.set(bytes, this.length);
    this.length += bytes.length;
  }

  finish() {
    return this.#buffer.slice(0, this.length);
  }
}

function malformed(problem) {
  return new WeirError(`the keyed-state request is malformed: ${problem} (docs/ABI.md §17)`);
}

function need(request, offset, needed) {
  if (offset + needed > request.length) {
    throw malformed(
      `it ends at byte ${request.length} within an entry that needs ${needed} bytes at ${offset}`,
    );
  }
}

function key(bytes) {
  if (bytes.length > MAX_KEY_BYTES) {
    throw malformed(`a key is ${bytes.length} bytes long, over the ${MAX_KEY_BYTES}-byte limit`);
  }
  return bytes;
}

/**
 * The entries of a read request, `[state, key]`, read as the host reads them: a malformed
 * request throws a WeirError.
 *
 * @param {Uint8Array} request
 * @returns {[number, Uint8Array][]}
 */
export function reads(request) {
  const view = new DataView(request.buffer, request.byteOffset, request.byteLength);
  const entries = [];
  let offset = 0;
  while (offset < request.length) {
    need(request, offset, 6);
    const state = view.getUint16(offset, true);
    const length = view.getUint32(offset + 2, true);
    offset += 6;
    need(request, offset, length);
    entries.push([state, key(request.slice(offset, offset + length))]);
    offset += length;
  }
  return entries;
}

/**
 * The entries of a write request, `[state, key, value or undefined]`, read as the host reads
 * them: a malformed request throws a WeirError.
 *
 * @param {Uint8Array} request
 * @returns {[number, Uint8Array, Uint8Array | undefined][]}
 */
export function writes(request) {
  const view = new DataView(request.buffer, request.byteOffset, request.byteLength);
  const entries = [];
  let offset = 0;
  while (offset < request.length) {
    need(request, offset, 7);
    const op = request[offset];
    if (op !== PUT && op !== DELETE) {
      throw malformed(`byte ${offset} holds the op ${op}, which is neither ${PUT} (put) nor ${DELETE} (delete)`);
    }
    const state = view.getUint16(offset + 1, true);
    let length = view.getUint32(offset + 3, true);
    offset += 7;
    need(request, offset, length);
    const k = key(request.slice(offset, offset + length));
    offset += length;
    let value;
    if (op === PUT) {
      need(request, offset, 4);
      length = view.getUint32(offset, true);
      offset += 4;
      need(request, offset, length);
      if (length > MAX_VALUE_BYTES) {
        throw malformed(`a value is ${length} bytes long, over the ${MAX_VALUE_BYTES}-byte limit`);
      }
      value = request.slice(offset, offset + length);
      offset += length;
    }
    entries.push([state, k, value]);
  }
  return entries;
}

/**
 * A read result: per answer, its value's length and bytes, or ABSENT.
 *
 * @param {(Uint8Array | undefined)[]} answers
 * @returns {Uint8Array}
 */
export function encodeResult(answers) {
  const writer = new RequestWriter();
  for (const value of answers) {
    if (value === undefined) {
      writer.u32(ABSENT);
    } else {
      writer.u32(value.length);
      writer.bytes(value);
    }
  }
  return writer.finish();
}
