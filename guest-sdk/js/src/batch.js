// Why this module exists: records cross between the host and the guest only in batches, in the
// layout of docs/ABI.md §5. This module reads input batches into records whose keys and values
// are views of the batch (no copy, no per-byte JS loop) and writes output batches into one
// growable buffer.

import { WeirError } from './errors.js';
import { EVENT_TIME, PROCESSING_TIME, readTimestamp, writeTimestamp } from './time.js';

/** Bytes before the first record: record_count u32, port u32. */
const HEADER_BYTES = 8;

/** Bytes before a record's key: timestamp i64, key_len u32, value_len u32. */
const RECORD_HEADER_BYTES = 16;

const encoder = new TextEncoder();

/**
 * @typedef {object} Record One record of a batch.
 * @property {Uint8Array} key the key; empty when the record has none. A view of the batch:
 *   `bytesKey(key)` or `key.slice()` to keep it past the call without keeping the whole batch.
 * @property {Uint8Array} value the value, a view of the batch like the key
 * @property {number | bigint} timestamp event time in milliseconds: a Number when it is a safe
 *   integer, a BigInt otherwise
 */

/**
 * Decodes the batch layout of docs/ABI.md §5, checking it whole before any record is used.
 *
 * @param {Uint8Array} bytes
 * @param {string} what the batch, for messages: `input batch`, `timer batch`
 * @returns {{ port: number, records: Record[] }}
 */
export function decodeBatch(bytes, what) {
  if (!(bytes instanceof Uint8Array)) {
    throw new WeirError(`malformed ${what}: expected bytes`);
  }
  if (bytes.length < HEADER_BYTES) {
    throw new WeirError(`malformed ${what}: ${bytes.length} bytes, shorter than its 8-byte header`);
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const count = view.getUint32(0, true);
  const port = view.getUint32(4, true);
  // Every record takes at least its 16-byte header: a count the bytes cannot hold is refused
  // before an array of that size is made.
  if (count > (bytes.length - HEADER_BYTES) / RECORD_HEADER_BYTES) {
    throw new WeirError(
      `malformed ${what}: ${count} records cannot fit in ${bytes.length} bytes`,
    );
  }
  const records = new Array(count);
  let at = HEADER_BYTES;
  for (let i = 0; i < count; i++) {
    if (bytes.length - at < RECORD_HEADER_BYTES) {
      throw new WeirError(`malformed ${what}: record ${i} needs 16 bytes at offset ${at}`);
    }
    const timestamp = readTimestamp(view, at);
    const keyLength = view.getUint32(at + 8, true);
    const valueLength = view.getUint32(at + 12, true);
    const keyStart = at + RECORD_HEADER_BYTES;
    const valueStart = keyStart + keyLength;
    const end = valueStart + valueLength;
    if (end > bytes.length) {
      throw new WeirError(
        `malformed ${what}: record ${i} needs ${end - at} bytes at offset ${at}, ` +
          `but the batch has ${bytes.length - at} left`,
      );
    }
    records[i] = {
      key: bytes.subarray(keyStart, valueStart),
      value: bytes.subarray(valueStart, end),
      timestamp,
    };
    at = end;
  }
  if (at !== bytes.length) {
    throw new WeirError(
      `malformed ${what}: ${bytes.length - at} bytes left over after its ${count} records`,
    );
  }
  return { port, records };
}

/** A batch of input records, as `Operator.process` receives it. */
export class Batch {
  /** @type {Record[]} */
  #records;

  /**
   * @param {number} port the input the batch arrived on
   * @param {Record[]} records
   */
  constructor(port, records) {
    /** The input the batch arrived on, numbered from 0 in the order the job file lists them. */
    this.port = port;
    this.#records = records;
  }

  /** How many records the batch holds (it may hold none). */
  get length() {
    return this.#records.length;
  }

  /**
   * The record at `index`, or `undefined` past the end.
   * @param {number} index
   * @returns {Record | undefined}
   */
  get(index) {
    return this.#records[index];
  }

  /** The records in order. @returns {IterableIterator<Record>} */
  [Symbol.iterator]() {
    return this.#records[Symbol.iterator]();
  }
}

/**
 * @typedef {object} Timer One fired timer.
 * @property {Uint8Array} key the key it was set for
 * @property {number | bigint} timestamp the time it was set at (a Number when safe)
 */

/** Timers that fired, as `Operator.onTimers` receives them: all of one domain, in order. */
export class Timers {
  /** @type {Timer[]} */
  #timers;

  /**
   * @param {number} domain `EVENT_TIME` or `PROCESSING_TIME`
   * @param {Timer[]} timers
   */
  constructor(domain, timers) {
    /** `EVENT_TIME` or `PROCESSING_TIME`: the domain of every timer here. */
    this.domain = domain;
    this.#timers = timers;
  }

  /** How many timers fired. */
  get length() {
    return this.#timers.length;
  }

  /**
   * The timer at `index`, or `undefined` past the end.
   * @param {number} index
   * @returns {Timer | undefined}
   */
  get(index) {
    return this.#timers[index];
  }

  /** The timers in firing order: by timestamp, ties by key bytes. @returns {IterableIterator<Timer>} */
  [Symbol.iterator]() {
    return this.#timers[Symbol.iterator]();
  }
}

/**
 * Decodes the batch of fired timers the host passes to `on-timers`: its port is the domain,
 * each record one timer with an empty value (docs/ABI.md §15).
 *
 * @param {Uint8Array} bytes
 * @returns {Timers}
 */
export function decodeTimers(bytes) {
  const { port, records } = decodeBatch(bytes, 'timer batch');
  if (port !== EVENT_TIME && port !== PROCESSING_TIME) {
    throw new WeirError(`malformed timer batch: its port ${port} is no time domain (0 or 1)`);
  }
  return new Timers(
    port,
    records.map(({ key, timestamp }) => ({ key, timestamp })),
  );
}

/**
 * Builds one output batch (port 0) in a buffer that grows by doubling and is reused after each
 * `clear`.
 */
export class BatchWriter {
  constructor() {
    this.buffer = new Uint8Array(4096);
    this.view = new DataView(this.buffer.buffer);
    this.length = HEADER_BYTES;
    this.count = 0;
  }

  /**
   * Appends one record; `key` and `value` are bytes or strings (written as UTF-8 straight into
   * the buffer), the timestamp already checked.
   *
   * @param {Uint8Array | string} key
   * @param {Uint8Array | string} value
   * @param {number | bigint} timestamp
   */
  push(key, value, timestamp) {
    // A string takes at most 3 bytes of UTF-8 per UTF-16 unit.
    const most =
      RECORD_HEADER_BYTES +
      (typeof key === 'string' ? key.length * 3 : key.length) +
      (typeof value === 'string' ? value.length * 3 : value.length);
    this.#reserve(most);
    const at = this.length;
    const keyStart = at + RECORD_HEADER_BYTES;
    const keyLength = this.#write(key, keyStart);
    const valueLength = this.#write(value, keyStart + keyLength);
    writeTimestamp(this.view, at, timestamp);
    this.view.setUint32(at + 8, keyLength, true);
    this.view.setUint32(at + 12, valueLength, true);
    this.length = keyStart + keyLength + valueLength;
    this.count++;
  }

  /** Whether no record was pushed since the last `clear`. */
  isEmpty() {
    return this.count === 0;
  }

  /**
   * The batch: a view of the buffer, valid until the next `push` or `clear`.
   * @returns {Uint8Array}
   */
  bytes() {
    this.view.setUint32(0, this.count, true);
    this.view.setUint32(4, 0, true);
    return this.buffer.subarray(0, this.length);
  }

  /** Forgets the records, keeping the buffer. */
  clear() {
    this.length = HEADER_BYTES;
    this.count = 0;
  }

  /** Grows the buffer so that `more` bytes fit after the records. */
  #reserve(more) {
    const needed = this.length + more;
    if (needed <= this.buffer.length) return;
    let size = this.buffer.length * 2;
    while (size < needed) size *= 2;
    const grown = new Uint8Array(size);
    grown.set(this.buffer.subarray(0, this.length));
    this.buffer = grown;
    this.view = new DataView(grown.buffer);
  }

  /** Writes bytes or a string's UTF-8 at `at`; returns how many bytes it wrote. */
  #write(data, at) {
    if (typeof data === 'string') {
      return data.length === 0 ? 0 : encoder.encodeInto(data, this.buffer.subarray(at)).written;
    }
    this.buffer.set(data, at);
    return data.length;
  }
}
