// Why this module exists: operators are tested natively, under Node's own test runner, through
// the same code path as the component: the Harness drives the very `guest` exports the
// component glue exports (src/guest.js) — the same batch decoding, the same JSON snapshot and
// restore, the same error handling — against an emulation of the host: its output checks, its
// timers (fired in the host's order, batching and rounds, docs/ABI.md §15), its watermark and
// a processing-time clock that the test moves.

import { AssertionError } from 'node:assert';
import { BatchWriter, decodeBatch } from './src/batch.js';
import { bytesKey, toBytes, utf8 } from './src/bytes.js';
import { Context, initMessage } from './src/context.js';
import { WeirError } from './src/errors.js';
import { makeGuest } from './src/guest.js';
import {
  DEFAULT_MAX_PARALLELISM,
  encodeResult,
  keyGroup,
  owner,
  reads,
  writes,
} from './src/keyed.js';
import {
  END_OF_TIME,
  EVENT_TIME,
  NO_WATERMARK,
  PROCESSING_TIME,
  checkTimestamp,
  timestampFromBigInt,
  timestampToBigInt,
} from './src/time.js';

/** Most timers the host passes to one `on-timers` call (docs/ABI.md §9). */
export const MAX_TIMERS_PER_CALL = 1024;

/** Most rounds of firing one advance of time may take before the host fails the guest (§15). */
export const MAX_FIRING_ROUNDS = 64;

/** Longest side output name, in bytes (docs/ABI.md §15). */
const MAX_OUTPUT_NAME_BYTES = 255;

/** The calls that may emit, and those that may use timers (docs/ABI.md §4). */
const MAY_EMIT = new Set(['process', 'onTimers', 'onWatermark', 'finish']);
const MAY_USE_TIMERS = new Set(['process', 'onTimers', 'onWatermark']);

/**
 * @typedef {import('./src/batch.js').Record} Record
 */

/**
 * A record for test input or expected output: strings become their UTF-8, and the timestamp
 * takes the form the SDK gives it (a Number when it is a safe integer, a BigInt otherwise), so
 * that `assert.deepStrictEqual` compares it with what an operator emitted.
 *
 * @param {Uint8Array | string} key
 * @param {Uint8Array | string} [value]
 * @param {number | bigint} [timestamp]
 * @returns {Record}
 */
export function record(key, value = '', timestamp = 0) {
  checkTimestamp(timestamp, 'record: the timestamp');
  return {
    key: Uint8Array.from(toBytes(key, 'record: the key')),
    value: Uint8Array.from(toBytes(value, 'record: the value')),
    timestamp: timestampFromBigInt(BigInt(timestamp)),
  };
}

/** An operator's method failed: what the host would report, and the call that failed. */
export class OperatorError extends Error {
  /**
   * @param {string} call the guest export that failed: `process`, `snapshot`, …
   * @param {string} message the operator's error message and stack, as the host receives it
   */
  constructor(call, message) {
    super(`${call} failed: ${message}`);
    this.name = 'OperatorError';
    /** The guest export that failed. */
    this.call = call;
    /** The message the host would report. */
    this.operatorMessage = message;
  }
}

/**
 * What the host keeps for one instance, emulated: emitted batches, timers, the watermark, a
 * clock and log lines. It implements the SDK's Host (src/output.js) and checks where each
 * import is called and the side output names as the host does (not the host's limits).
 */
class EmulatedHost {
  constructor() {
    /** @type {Uint8Array[]} */
    this.emitted = [];
    /** @type {[string, Uint8Array][]} */
    this.emittedTo = [];
    /** @type {Map<string, { timestamp: bigint, key: Uint8Array }>[]} by domain code */
    this.timers = [new Map(), new Map()];
    this.watermark = NO_WATERMARK;
    this.clock = 0n;
    /** @type {string | null} the guest export running */
    this.call = null;
    /** @type {{ level: string, message: string }[]} */
    this.logs = [];
    /**
     * The instance's keyed state kept on the host (ValueState), by `state:key`.
     * @type {Map<string, { state: number, key: Uint8Array, value: Uint8Array }>}
     */
    this.keyed = new Map();
  }

  stateGet(request) {
    this.#allowed(MAY_EMIT, 'state-get');
    return encodeResult(reads(request).map(([state, key]) => this.keyed.get(keyedId(state, key))?.value));
  }

  stateWrite(request) {
    this.#allowed(MAY_EMIT, 'state-write');
    // Read whole first: a malformed request changes nothing, as on the host.
    for (const [state, key, value] of writes(request)) {
      const id = keyedId(state, key);
      if (value === undefined) this.keyed.delete(id);
      else this.keyed.set(id, { state, key, value });
    }
  }

  emit(batch) {
    this.#allowed(MAY_EMIT, 'emit');
    this.emitted.push(batch.slice());
  }

  emitTo(name, batch) {
    this.#allowed(MAY_EMIT, 'emit-to');
    const bytes = utf8(name).length;
    if (bytes === 0 || bytes > MAX_OUTPUT_NAME_BYTES) {
      throw new WeirError(`emit-to: a side output name of ${bytes} bytes (names are 1 to 255)`);
    }
    this.emittedTo.push([name, batch.slice()]);
  }

  timerSet(domain, timestamp, key) {
    this.#allowed(MAY_USE_TIMERS, 'timer-set');
    const id = timerId(timestamp, key);
    const timers = this.#domain(domain);
    if (!timers.has(id)) timers.set(id, { timestamp, key: key.slice() });
  }

  timerDelete(domain, timestamp, key) {
    this.#allowed(MAY_USE_TIMERS, 'timer-delete');
    this.#remove(domain, timestamp, key);
  }

  /** Removes a timer, if it is set. */
  #remove(domain, timestamp, key) {
    this.#domain(domain).delete(timerId(timestamp, key));
  }

  currentTime(domain) {
    this.#domain(domain);
    return domain === EVENT_TIME ? this.watermark : this.clock;
  }

  log(level, message) {
    this.logs.push({ level, message });
  }

  /**
   * The timers of `domain`, in firing order: by timestamp, ties by key bytes.
   * @returns {{ timestamp: bigint, key: Uint8Array }[]}
   */
  sorted(domain) {
    return [...this.timers[domain].values()].sort(compareTimers);
  }

  /** Removes and returns up to `most` of the timers of `domain` due at `time`, in order. */
  popDue(domain, time, most) {
    const fired = this.sorted(domain)
      .filter((timer) => timer.timestamp <= time)
      .slice(0, most);
    for (const timer of fired) this.#remove(domain, timer.timestamp, timer.key);
    return fired;
  }

  /** Drops every timer of `domain`. */
  clearTimers(domain) {
    this.timers[domain].clear();
  }

  #allowed(calls, name) {
    if (!calls.has(this.call)) {
      throw new WeirError(`${name} is not allowed during ${this.call ?? 'no call'} (docs/ABI.md §4)`);
    }
  }

  #domain(domain) {
    const timers = this.timers[domain];
    if (timers === undefined) throw new WeirError(`no time domain has the code ${String(domain)}`);
    return timers;
  }
}

/** A keyed value's identity: the pair (state, key). */
function keyedId(state, key) {
  return `${state}:${bytesKey(key)}`;
}

/** A timer's identity: the pair (timestamp, key). */
function timerId(timestamp, key) {
  return `${timestamp}:${bytesKey(key)}`;
}

/** Orders timers by timestamp, ties by key bytes. */
function compareTimers(a, b) {
  if (a.timestamp !== b.timestamp) return a.timestamp < b.timestamp ? -1 : 1;
  return compareBytes(a.key, b.key);
}

/** Orders byte strings bytewise. */
function compareBytes(a, b) {
  const common = Math.min(a.length, b.length);
  for (let i = 0; i < common; i++) {
    if (a[i] !== b[i]) return a[i] - b[i];
  }
  return a.length - b.length;
}

/**
 * A checkpoint of one instance as the host takes it (Harness#checkpoint).
 *
 * @typedef {object} Checkpoint
 * @property {Uint8Array} state the operator's snapshot
 * @property {Map<string, { timestamp: bigint, key: Uint8Array }>[]} timers by domain
 * @property {bigint} watermark
 * @property {Map<string, { state: number, key: Uint8Array, value: Uint8Array }>} keyed
 */

/**
 * Encodes records as a batch arriving on `port`.
 *
 * @param {number} port
 * @param {Iterable<{ key: Uint8Array | string, value: Uint8Array | string, timestamp: number | bigint }>} records
 * @returns {Uint8Array}
 */
export function encodeBatch(port, records) {
  if (!Number.isInteger(port) || port < 0 || port > 0xffffffff) {
    throw new WeirError(`a port is an integer from 0 to 2^32 - 1, not ${String(port)}`);
  }
  const writer = new BatchWriter();
  for (const { key, value, timestamp } of records) {
    checkTimestamp(timestamp, 'the timestamp');
    writer.push(toBytes(key, 'the key'), toBytes(value, 'the value'), timestamp);
  }
  const bytes = writer.bytes().slice();
  new DataView(bytes.buffer).setUint32(4, port, true);
  return bytes;
}

/**
 * One operator instance, driven natively the way the host drives a component.
 *
 * Besides the operator it keeps what the host keeps for an instance: its timers, the task's
 * watermark, a processing-time clock (starting at 0), the side outputs' records and the log.
 * Every method that calls the operator returns the records it emitted on its main output, or
 * throws an `OperatorError` when the operator failed. A failed instance refuses every later
 * call, as the host never calls one again: `restoreIntoFresh` starts over from a snapshot.
 */
export class Harness {
  /** @type {(host: EmulatedHost) => import('./src/guest.js').Guest & { operator: object | null }} */
  #newGuest;
  #context;
  #host = new EmulatedHost();
  /** @type {import('./src/guest.js').Guest & { operator: object | null }} */
  #guest;
  /** @type {Map<string, Record[]>} */
  #sides = new Map();
  #checkpointId = 0;

  /**
   * Creates the instance, with `new OperatorClass(ctx)` from an init message as the host sends
   * it; throws an `OperatorError` if the constructor throws. Instead of a class it takes a
   * component loaded by `loadComponent` (testing-component.js), whose instances it drives the
   * same way.
   *
   * @param {typeof import('./src/operator.js').Operator | import('./testing-component.js').LoadedComponent} subject
   * @param {Context} [ctx]
   */
  constructor(subject, ctx = new Context()) {
    if (!(ctx instanceof Context)) {
      throw new WeirError('Harness: the second argument must be a Context');
    }
    this.#newGuest =
      typeof subject?.newGuest === 'function'
        ? (host) => subject.newGuest(host)
        : (host) => makeGuest(subject, host);
    this.#context = ctx;
    this.#guest = this.#init();
  }

  /** The operator instance under test, to inspect its fields (null for a component). */
  get operator() {
    return this.#guest.operator;
  }

  /** The context the instance was created with. */
  get context() {
    return this.#context;
  }

  /** Every line the operator logged, in order: `{ level, message }`. */
  get logs() {
    return this.#host.logs;
  }

  /**
   * Processes a batch of one record on port 0.
   *
   * @param {Uint8Array | string} key
   * @param {Uint8Array | string} [value]
   * @param {number | bigint} [timestamp]
   * @returns {Record[]} what the operator emitted on its main output
   */
  push(key, value = '', timestamp = 0) {
    return this.pushOn(0, [{ key, value, timestamp }]);
  }

  /**
   * Processes one batch of `records` arriving on input `port`.
   *
   * @param {number} port
   * @param {Iterable<{ key: Uint8Array | string, value: Uint8Array | string, timestamp: number | bigint }>} records
   * @returns {Record[]}
   */
  pushOn(port, records) {
    return this.pushBatch(encodeBatch(port, records));
  }

  /**
   * Processes an encoded batch, as the host passes it to `process`; malformed bytes fail as
   * they do in a component.
   *
   * @param {Uint8Array} bytes
   * @returns {Record[]}
   */
  pushBatch(bytes) {
    return this.#run('process', () => this.#guest.process(bytes));
  }

  /**
   * Processes an encoded batch and returns the batches the operator emitted on its main
   * output, encoded, as the host receives them: to check the batches themselves, byte for
   * byte. (They are checked as the host checks them; side outputs are kept as usual.)
   *
   * @param {Uint8Array} bytes
   * @returns {Uint8Array[]}
   */
  pushBatchEncoded(bytes) {
    let batches;
    this.#run('process', () => this.#guest.process(bytes), (emitted) => {
      batches = emitted;
    });
    return batches;
  }

  /**
   * Advances the task's watermark, as the host does when its inputs' watermarks move. The
   * event-time timers at or before it fire in rounds: each round hands the timers due when it
   * starts to `onTimers` in timestamp order, ties by key, at most 1024 per call; timers set
   * meanwhile that are due fire in the next round; more than 64 rounds fail. Then
   * `onWatermark` runs. The same watermark again is no advance (nothing is called); an earlier
   * one throws.
   *
   * @param {number | bigint} watermark
   * @returns {Record[]}
   */
  advanceWatermark(watermark) {
    const to = timestampToBigInt(watermark, 'advanceWatermark: the watermark');
    const current = this.#host.watermark;
    if (to < current) {
      throw new WeirError(`the watermark cannot move back, from ${current} to ${to}`);
    }
    if (to === current) return [];
    this.#host.watermark = to;
    const emitted = this.#fire(EVENT_TIME, to);
    emitted.push(...this.#run('onWatermark', () => this.#guest.onWatermark(to)));
    return emitted;
  }

  /**
   * Sets the harness's processing-time clock (milliseconds; it starts at 0) and fires the
   * processing-time timers at or before it, in rounds as `advanceWatermark` fires event-time
   * ones (without calling `onWatermark`). Moving the clock back throws.
   *
   * @param {number | bigint} time
   * @returns {Record[]}
   */
  advanceProcessingTime(time) {
    const to = timestampToBigInt(time, 'advanceProcessingTime: the time');
    if (to < this.#host.clock) {
      throw new WeirError(`the harness's clock cannot move back, from ${this.#host.clock} to ${to}`);
    }
    this.#host.clock = to;
    return this.#fire(PROCESSING_TIME, to);
  }

  /**
   * Ends every input, as the host does: the watermark advances to `END_OF_TIME`, firing every
   * event-time timer, then `onWatermark(END_OF_TIME)` runs, then `finish`. Processing-time
   * timers still set are dropped.
   *
   * @returns {Record[]}
   */
  finish() {
    const emitted = this.advanceWatermark(END_OF_TIME);
    this.#host.clearTimers(PROCESSING_TIME);
    emitted.push(...this.#run('finish', () => this.#guest.finish()));
    return emitted;
  }

  /**
   * Tells the operator that checkpoints up to `checkpointId` are durable.
   * @param {number | bigint} checkpointId
   */
  checkpointComplete(checkpointId) {
    this.#run('checkpointComplete', () => this.#guest.checkpointComplete(BigInt(checkpointId)));
  }

  /**
   * The operator's state, as the host would store it at the next checkpoint.
   * @returns {Uint8Array}
   */
  snapshot() {
    this.#checkpointId++;
    let state;
    this.#run('snapshot', () => {
      state = this.#guest.snapshot(BigInt(this.#checkpointId));
    });
    return state.slice();
  }

  /**
   * Replaces the instance by a fresh one, made from the same context and then restored from
   * `state` — what a job restart does to the guest. The host's part (timers, watermark,
   * clock) stays as it is, as the host restores its own state; side outputs are kept (they
   * are output).
   *
   * @param {Uint8Array} state
   */
  restoreIntoFresh(state) {
    if (!(state instanceof Uint8Array)) {
      throw new WeirError('restoreIntoFresh: the state must be a Uint8Array, as snapshot() returns it');
    }
    this.#guest = this.#init();
    this.#run('restore', () => this.#guest.restore(Uint8Array.from(state)));
  }

  /** Snapshots the instance and replaces it by a fresh one restored from the snapshot. */
  snapshotAndRestore() {
    this.restoreIntoFresh(this.snapshot());
  }

  /**
   * Takes a checkpoint the way the host does: the operator's snapshot and the host's state for
   * the instance: its timers, the watermark and its keyed state.
   *
   * @returns {Checkpoint}
   */
  checkpoint() {
    const host = this.#host;
    return {
      state: this.snapshot(),
      timers: host.timers.map((timers) => new Map(timers)),
      watermark: host.watermark,
      keyed: new Map(host.keyed),
    };
  }

  /**
   * Restores `checkpoint` the way a job restart does: a fresh instance restored from its
   * snapshot, and the host's timers, watermark and keyed state as they were. The clock is not
   * rewound, nor the side outputs.
   *
   * @param {Checkpoint} checkpoint
   */
  restoreCheckpoint(checkpoint) {
    this.restoreIntoFresh(checkpoint.state);
    const host = this.#host;
    host.timers = checkpoint.timers.map((timers) => new Map(timers));
    host.watermark = checkpoint.watermark;
    host.keyed = new Map(checkpoint.keyed);
  }

  /**
   * Splits and merges the checkpoints of an operator's subtasks (one per subtask, in order,
   * taken at parallelism `checkpoints.length`) for `parallelism` subtasks, the way the host
   * does when a job is restored at another parallelism (docs/ABI.md §16): keyed state kept on
   * the host and timers go to the subtask that owns their key's group among
   * `maxParallelism`, and each gets the smallest watermark. Returns one harness per new
   * subtask, restored, its context `ctx` with its subtask and parallelism.
   *
   * Throws a WeirError, as the host refuses the restore, when an operator's snapshot is not
   * empty: its JSON cannot be split by key. An operator that keeps its state in ValueState has
   * an empty snapshot.
   *
   * @param {typeof import('./src/operator.js').Operator} subject
   * @param {Context} ctx
   * @param {Checkpoint[]} checkpoints
   * @param {number} parallelism
   * @param {number} [maxParallelism]
   * @returns {Harness[]}
   */
  static rescale(subject, ctx, checkpoints, parallelism, maxParallelism = DEFAULT_MAX_PARALLELISM) {
    for (const count of [checkpoints.length, parallelism]) {
      if (!Number.isInteger(count) || count < 1 || count > maxParallelism) {
        throw new WeirError(`parallelism ${count} is not between 1 and the max_parallelism ${maxParallelism}`);
      }
    }
    checkpoints.forEach((checkpoint, subtask) => {
      if (checkpoint.state.length > 0) {
        throw new WeirError(
          `the host would refuse this rescale: the snapshot of subtask ${subtask} is ` +
            `${checkpoint.state.length} bytes of the operator's own state, which the host cannot ` +
            'split by key; keep keyed state in ValueState',
        );
      }
    });
    const ownerOf = (key) => owner(keyGroup(key, maxParallelism), parallelism, maxParallelism);
    const keyed = Array.from({ length: parallelism }, () => new Map());
    const timers = Array.from({ length: parallelism }, () => [new Map(), new Map()]);
    for (const checkpoint of checkpoints) {
      for (const [id, entry] of checkpoint.keyed) keyed[ownerOf(entry.key)].set(id, entry);
      checkpoint.timers.forEach((pending, domain) => {
        for (const [id, timer] of pending) timers[ownerOf(timer.key)][domain].set(id, timer);
      });
    }
    const watermark = checkpoints.map((c) => c.watermark).reduce((a, b) => (a < b ? a : b));
    return Array.from({ length: parallelism }, (_, subtask) => {
      const context = new Context(ctx.operator, { subtask, parallelism, config: ctx.config });
      const harness = new Harness(subject, context);
      harness.restoreCheckpoint({
        state: new Uint8Array(0),
        timers: timers[subtask],
        watermark,
        keyed: keyed[subtask],
      });
      return harness;
    });
  }

  /** The instance's keyed state kept on the host, as `[state, key, value]` entries. */
  keyedState() {
    return [...this.#host.keyed.values()].map(({ state, key, value }) => [state, key.slice(), value.slice()]);
  }

  /**
   * Every record the operator emitted on the side output `name` so far, in order.
   * @param {string} name
   * @returns {Record[]}
   */
  sideOutput(name) {
    return this.#sides.get(name) ?? [];
  }

  /** The names of the side outputs the operator emitted on, in the order of first use. */
  sideOutputNames() {
    return [...this.#sides.keys()];
  }

  /** The task's watermark: `NO_WATERMARK` until the first advance. */
  watermark() {
    return timestampFromBigInt(this.#host.watermark);
  }

  /** The harness's processing-time clock. */
  processingTime() {
    return timestampFromBigInt(this.#host.clock);
  }

  /**
   * The timers of `domain` that are set, in firing order.
   * @param {number} domain `EVENT_TIME` or `PROCESSING_TIME`
   * @returns {{ key: Uint8Array, timestamp: number | bigint }[]}
   */
  pendingTimers(domain) {
    if (domain !== EVENT_TIME && domain !== PROCESSING_TIME) {
      throw new WeirError(`pendingTimers: no time domain has the code ${String(domain)}`);
    }
    return this.#host
      .sorted(domain)
      .map(({ key, timestamp }) => ({ key: key.slice(), timestamp: timestampFromBigInt(timestamp) }));
  }

  /** A new guest for the operator, initialised from the context's init message. */
  #init() {
    const guest = this.#newGuest(this.#host);
    this.#call('init', () => guest.init(initMessage(this.#context)));
    return guest;
  }

  /** Fires the timers of `domain` due at `time`, in rounds; returns what the operator emitted. */
  #fire(domain, time) {
    const emitted = [];
    for (let round = 1; ; round++) {
      let due = this.#host.sorted(domain).filter((timer) => timer.timestamp <= time).length;
      if (due === 0) return emitted;
      if (round > MAX_FIRING_ROUNDS) {
        throw new OperatorError(
          'onTimers',
          `${domain === EVENT_TIME ? 'event' : 'processing'}-time timers were still due at ${time} ` +
            `after ${MAX_FIRING_ROUNDS} rounds of firing: the operator keeps setting timers at or ` +
            'before the time they fire at (docs/ABI.md §15)',
        );
      }
      while (due > 0) {
        const fired = this.#host.popDue(domain, time, Math.min(due, MAX_TIMERS_PER_CALL));
        if (fired.length === 0) break; // the operator deleted the rest of the round's timers
        due -= fired.length;
        const batch = encodeBatch(
          domain,
          fired.map(({ key, timestamp }) => ({ key, value: '', timestamp: timestampFromBigInt(timestamp) })),
        );
        emitted.push(...this.#run('onTimers', () => this.#guest.onTimers(batch)));
      }
    }
  }

  /**
   * Runs one guest export and returns what it emitted on the main output, keeping what it
   * emitted on side outputs; checks the batches as the host does. A failed call's output is
   * dropped. `takeBatches`, when given, also gets the main output's batches as they are.
   */
  #run(call, body, takeBatches = null) {
    this.#call(call, body);
    const main = this.#host.emitted;
    takeBatches?.(main);
    const sides = this.#host.emittedTo;
    this.#host.emitted = [];
    this.#host.emittedTo = [];
    const records = [];
    for (const bytes of main) records.push(...outputRecords(bytes, 'the main output'));
    for (const [name, bytes] of sides) {
      if (!this.#sides.has(name)) this.#sides.set(name, []);
      this.#sides.get(name).push(...outputRecords(bytes, `side output \`${name}\``));
    }
    return records;
  }

  /** Calls the guest export `call`, turning its failure into an OperatorError. */
  #call(call, body) {
    this.#host.call = call;
    try {
      body();
    } catch (error) {
      this.#host.emitted = [];
      this.#host.emittedTo = [];
      throw typeof error === 'string' ? new OperatorError(call, error) : error;
    } finally {
      this.#host.call = null;
    }
  }
}

/** The records of an emitted batch, checked as the host checks it. */
function outputRecords(bytes, where) {
  let batch;
  try {
    batch = decodeBatch(bytes, 'output batch');
  } catch (error) {
    throw new WeirError(`the operator emitted a malformed batch on ${where}: ${error.message}`);
  }
  if (batch.port !== 0) {
    throw new WeirError(`the operator emitted a batch on ${where} whose port is ${batch.port}, not 0`);
  }
  return batch.records.map(({ key, value, timestamp }) => ({ key: key.slice(), value: value.slice(), timestamp }));
}

/**
 * Bytes as text for messages: a JSON string when they are printable UTF-8, hex (`0x…`)
 * otherwise.
 */
function showBytes(bytes) {
  try {
    const text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    // eslint-disable-next-line no-control-regex
    if (!/[\u0000-\u001f\u007f-\u009f]/.test(text)) return JSON.stringify(text);
  } catch {
    // not UTF-8: shown in hex below
  }
  return '0x' + Array.from(bytes, (byte) => byte.toString(16).padStart(2, '0')).join('');
}

/** One record as text, for messages. */
function showRecord(r) {
  if (r === undefined) return '(no record)';
  return `(${showBytes(r.key)}, ${showBytes(r.value)}, ${typeof r.timestamp === 'bigint' ? `${r.timestamp}n` : r.timestamp})`;
}

/** Whether two records are equal: the same key and value bytes and the same timestamp. */
function sameRecord(a, b) {
  return (
    a !== undefined &&
    b !== undefined &&
    a.timestamp === b.timestamp &&
    compareBytes(a.key, b.key) === 0 &&
    compareBytes(a.value, b.value) === 0
  );
}

/** How two record lists differ, or null when they are equal. */
function diff(leftName, left, rightName, right) {
  const length = Math.max(left.length, right.length);
  let index = 0;
  while (index < length && sameRecord(left[index], right[index])) index++;
  if (index === length) return null;
  const lines = [
    `records differ at index ${index} (${leftName}: ${left.length} records, ${rightName}: ${right.length})`,
    `  ${leftName}: ${showRecord(left[index])}`,
    `  ${rightName}: ${showRecord(right[index])}`,
  ];
  for (const [name, records] of [[leftName, left], [rightName, right]]) {
    lines.push(`${name}:`);
    records.slice(0, 50).forEach((r, i) => lines.push(` ${i === index ? '>' : ' '}${String(i).padStart(4)}: ${showRecord(r)}`));
    if (records.length > 50) lines.push(`   … ${records.length - 50} more`);
  }
  return lines.join('\n');
}

/**
 * Asserts that two record lists are equal; otherwise throws an AssertionError showing the
 * first index where they differ and both lists, keys and values as text or hex.
 *
 * @param {Record[]} actual
 * @param {Record[]} expected
 */
export function assertRecordsEqual(actual, expected) {
  const difference = diff('actual', actual, 'expected', expected);
  if (difference !== null) {
    throw new AssertionError({ message: difference, actual, expected, operator: 'assertRecordsEqual' });
  }
}

/**
 * Asserts that snapshotting an operator and restoring it into a fresh instance does not change
 * its output. Runs `records` through a new instance one record per batch, then `finish`; runs
 * them again through another, replacing the instance by a fresh one restored from its
 * snapshot after every `every`-th record; throws an AssertionError with a diff if the main
 * output or any side output differs (and the operator's error if it fails).
 *
 * @param {typeof import('./src/operator.js').Operator} OperatorClass
 * @param {Context} ctx
 * @param {Iterable<{ key: Uint8Array | string, value: Uint8Array | string, timestamp: number | bigint }>} records
 * @param {number} every
 */
export function assertRestorePreservesOutput(OperatorClass, ctx, records, every) {
  if (!Number.isInteger(every) || every < 1) {
    throw new WeirError(`assertRestorePreservesOutput: every must be an integer of at least 1, not ${String(every)}`);
  }
  const input = [...records];
  const run = (restoreEvery) => {
    const harness = new Harness(OperatorClass, ctx);
    const main = [];
    input.forEach((r, index) => {
      main.push(...harness.push(r.key, r.value, r.timestamp));
      if (restoreEvery !== null && (index + 1) % restoreEvery === 0) harness.snapshotAndRestore();
    });
    main.push(...harness.finish());
    const sides = new Map(harness.sideOutputNames().map((name) => [name, harness.sideOutput(name)]));
    return { main, sides };
  };
  const straight = run(null);
  const restored = run(every);
  const fail = (what, difference) => {
    throw new AssertionError({
      message: `${what} changes when the operator is restored into a fresh instance after every ${every} record(s)\n${difference}`,
      operator: 'assertRestorePreservesOutput',
    });
  };
  const mainDiff = diff('with restores', restored.main, 'without', straight.main);
  if (mainDiff !== null) fail('the output', mainDiff);
  for (const name of new Set([...straight.sides.keys(), ...restored.sides.keys()])) {
    const sideDiff = diff('with restores', restored.sides.get(name) ?? [], 'without', straight.sides.get(name) ?? []);
    if (sideDiff !== null) fail(`side output \`${name}\``, sideDiff);
  }
}
