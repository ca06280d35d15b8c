// Why this module exists: an operator emits records one by one, but the host takes them in
// batches (docs/ABI.md §5). `Output` encodes records straight into one reusable batch for the
// main output and one per side output, and hands each to the host at the end of the call, or
// as soon as it passes FLUSH_AT. It is also the operator's handle on the host's timers and
// clocks (docs/ABI.md §15), and enforces where the ABI allows each of them, with a clear error.

import { WeirError } from './errors.js';
import { describeType, toBytes, utf8 } from './bytes.js';
import { BatchWriter } from './batch.js';
import {
  EVENT_TIME,
  PROCESSING_TIME,
  checkTimestamp,
  timestampFromBigInt,
  timestampToBigInt,
} from './time.js';

/**
 * A batch is handed to the host once it reaches this many bytes: 1 MiB, the Rust SDK's
 * threshold, so that the same input gives the same batches in both (tests/all/languages.rs
 * compares them byte for byte).
 */
export const FLUSH_AT = 1 << 20;

/** Longest side output name, in bytes of UTF-8 (docs/ABI.md §15). */
const MAX_OUTPUT_NAME_BYTES = 255;

/**
 * What the SDK needs of the host: the imports of the WIT interface `host`, with time domains as
 * their codes and timestamps as signed BigInts.
 *
 * @typedef {object} Host
 * @property {(batch: Uint8Array) => void} emit
 * @property {(name: string, batch: Uint8Array) => void} emitTo
 * @property {(domain: number, timestamp: bigint, key: Uint8Array) => void} timerSet
 * @property {(domain: number, timestamp: bigint, key: Uint8Array) => void} timerDelete
 * @property {(domain: number) => bigint} currentTime
 * @property {(level: import('./log.js').Level, message: string) => void} log
 * @property {(request: Uint8Array) => Uint8Array} [stateGet] the interface `keyed-state`
 * @property {(request: Uint8Array) => void} [stateWrite]
 */

/** The SDK's own handles on an Output, kept off its public face. */
export const BEGIN = Symbol('begin');
export const END = Symbol('end');
export const FLUSH = Symbol('flush');
export const DISCARD = Symbol('discard');
/** ValueState's ways to the host's keyed state (src/keyed.js). */
export const STATE_GET = Symbol('stateGet');
export const STATE_WRITE = Symbol('stateWrite');

/** Why a host gives no keyed state. */
const NO_KEYED_STATE =
  'this component was built without keyed state: guest-sdk/js/build.sh builds against the ' +
  'world keyed-operator when a file beside the operator mentions ValueState';

/** The calls during which the operator holds an Output. */
const EMITTING_CALLS = new Set(['process', 'onTimers', 'onWatermark', 'finish']);

/** The sink for an operator's records, and its way to the host's timers and clocks. */
export class Output {
  /** @type {Host} */
  #host;
  /** @type {string | null} the operator method running, or null between calls */
  #call = null;
  #main = new BatchWriter();
  /** @type {Map<string, BatchWriter>} side outputs' batches, in the order of first use */
  #sides = new Map();

  /** @param {Host} host */
  constructor(host) {
    this.#host = host;
  }

  /**
   * Emits one record on the main output.
   *
   * @param {Uint8Array | string} key bytes, or a string for its UTF-8
   * @param {Uint8Array | string} value bytes, or a string for its UTF-8
   * @param {number | bigint} timestamp milliseconds: a safe integer Number or an i64 BigInt
   */
  emit(key, value, timestamp) {
    this.#checkEmitting('emit');
    checkRecord(key, value, timestamp);
    this.#main.push(key, value, timestamp);
    if (this.#main.length >= FLUSH_AT) this.#flushMain();
  }

  /**
   * Emits one record on the side output named `name`, which the job file wires to a
   * downstream vertex like any edge; records on a side output nothing reads are dropped and
   * counted by the host.
   *
   * @param {string} name 1 to 255 bytes of UTF-8
   * @param {Uint8Array | string} key
   * @param {Uint8Array | string} value
   * @param {number | bigint} timestamp
   */
  emitTo(name, key, value, timestamp) {
    this.#checkEmitting('emitTo');
    let side = this.#sides.get(name);
    if (side === undefined) {
      checkOutputName(name);
      side = new BatchWriter();
      this.#sides.set(name, side);
    }
    checkRecord(key, value, timestamp);
    side.push(key, value, timestamp);
    if (side.length >= FLUSH_AT) this.#flushSide(name, side);
  }

  /**
   * Sets a timer for `key` at `timestamp` in `domain`; setting a set timer changes nothing (a
   * timer is the triple). It fires into `onTimers` once the watermark (`EVENT_TIME`) or the
   * host's clock (`PROCESSING_TIME`) reaches `timestamp`. The host keeps and checkpoints
   * timers: the operator's state need not hold them. Allowed in `process`, `onTimers` and
   * `onWatermark`, not in `finish`.
   *
   * @param {number} domain `EVENT_TIME` or `PROCESSING_TIME`
   * @param {number | bigint} timestamp 0 or more (see the README: negative timer times cannot
   *   cross componentize-js 0.23.0's bindings)
   * @param {Uint8Array | string} key
   */
  setTimer(domain, timestamp, key) {
    const args = this.#timerArgs('setTimer', domain, timestamp, key);
    this.#host.timerSet(...args);
  }

  /**
   * Deletes the timer for `key` at `timestamp` in `domain`, if it is set. Allowed where
   * {@link Output#setTimer} is.
   *
   * @param {number} domain
   * @param {number | bigint} timestamp
   * @param {Uint8Array | string} key
   */
  deleteTimer(domain, timestamp, key) {
    const args = this.#timerArgs('deleteTimer', domain, timestamp, key);
    this.#host.timerDelete(...args);
  }

  /**
   * The task's watermark: no record at or before it is still to come, except late ones.
   * `NO_WATERMARK` (a BigInt) before the first; while event-time timers fire, already the
   * watermark that fires them.
   *
   * @returns {number | bigint}
   */
  watermark() {
    return timestampFromBigInt(this.#host.currentTime(EVENT_TIME));
  }

  /**
   * The host's clock, in milliseconds since the Unix epoch (in the test harness, its own
   * clock, which starts at 0).
   *
   * @returns {number | bigint}
   */
  processingTime() {
    return timestampFromBigInt(this.#host.currentTime(PROCESSING_TIME));
  }

  /** Reads keyed state: the host's `state-get` (src/keyed.js). */
  [STATE_GET](request) {
    this.#checkEmitting('keyed state');
    if (this.#host.stateGet === undefined) throw new WeirError(NO_KEYED_STATE);
    return this.#host.stateGet(request);
  }

  /** Writes keyed state: the host's `state-write`. */
  [STATE_WRITE](request) {
    this.#checkEmitting('keyed state');
    if (this.#host.stateWrite === undefined) throw new WeirError(NO_KEYED_STATE);
    this.#host.stateWrite(request);
  }

  /** Starts the operator method `call`. */
  [BEGIN](call) {
    this.#call = call;
  }

  /** Ends the running call: the Output refuses records until the next one. */
  [END]() {
    this.#call = null;
  }

  /** Hands the host what the call emitted since the last flush: main output first. */
  [FLUSH]() {
    this.#flushMain();
    for (const [name, side] of this.#sides) this.#flushSide(name, side);
  }

  /** Drops what the call emitted since the last flush (the call failed). */
  [DISCARD]() {
    this.#main.clear();
    for (const side of this.#sides.values()) side.clear();
  }

  #flushMain() {
    if (this.#main.isEmpty()) return;
    this.#host.emit(this.#main.bytes());
    this.#main.clear();
  }

  #flushSide(name, side) {
    if (side.isEmpty()) return;
    this.#host.emitTo(name, side.bytes());
    side.clear();
  }

  #checkEmitting(method) {
    if (!EMITTING_CALLS.has(this.#call)) {
      throw new WeirError(
        `Output.${method} was called after the operator method it was given to returned: ` +
          'emit only from process, onTimers, onWatermark and finish, with the Output they get',
      );
    }
  }

  /** Checks a timer call and returns the host's arguments for it. */
  #timerArgs(method, domain, timestamp, key) {
    this.#checkEmitting(method);
    if (this.#call === 'finish') {
      throw new WeirError(
        `Output.${method} is not allowed in finish: every input has ended, so no timer can fire ` +
          '(timers are allowed in process, onTimers and onWatermark)',
      );
    }
    if (domain !== EVENT_TIME && domain !== PROCESSING_TIME) {
      throw new WeirError(
        `Output.${method}: the domain must be EVENT_TIME (0) or PROCESSING_TIME (1), not ${String(domain)}`,
      );
    }
    const at = timestampToBigInt(timestamp, `Output.${method}: the timestamp`);
    if (at < 0n) {
      throw new WeirError(
        `Output.${method}: the timestamp ${timestamp} is negative, and componentize-js 0.23.0 ` +
          'cannot pass a negative s64 to the host (its bindings trap: ComponentizeJS issue 343); ' +
          'timers at or after 0 (1970) work',
      );
    }
    return [domain, at, toBytes(key, `Output.${method}: the key`)];
  }
}

/** Throws a `WeirError` unless the arguments make a record. */
function checkRecord(key, value, timestamp) {
  if (!(key instanceof Uint8Array) && typeof key !== 'string') {
    throw new WeirError(`the key must be a Uint8Array or a string, not ${describeType(key)}`);
  }
  if (!(value instanceof Uint8Array) && typeof value !== 'string') {
    throw new WeirError(`the value must be a Uint8Array or a string, not ${describeType(value)}`);
  }
  checkTimestamp(timestamp, 'the timestamp');
}

/** Throws a `WeirError` unless `name` is 1 to 255 bytes of UTF-8. */
function checkOutputName(name) {
  if (typeof name !== 'string') {
    throw new WeirError(`Output.emitTo: the side output name must be a string, not ${describeType(name)}`);
  }
  const bytes = utf8(name).length;
  if (bytes === 0 || bytes > MAX_OUTPUT_NAME_BYTES) {
    throw new WeirError(
      `Output.emitTo: the side output name \`${name.slice(0, 40)}${name.length > 40 ? '…' : ''}\` ` +
        `is ${bytes} bytes long; names are 1 to ${MAX_OUTPUT_NAME_BYTES} bytes of UTF-8`,
    );
  }
}
