// Why this file exists: the types of the Weir JavaScript SDK (index.js) for TypeScript users
// and editors. The SDK itself is plain JavaScript with JSDoc; see README.md.

/** Event time in milliseconds: a Number when it is a safe integer, a BigInt otherwise. */
export type Timestamp = number | bigint;

/** Bytes, or a string standing for its UTF-8. */
export type BytesLike = Uint8Array | string;

/** One input record. `key` and `value` are views of the batch: copy them to keep them. */
export interface Record {
  key: Uint8Array;
  value: Uint8Array;
  timestamp: Timestamp;
}

/** One fired timer. */
export interface Timer {
  key: Uint8Array;
  timestamp: Timestamp;
}

/** The event-time domain: a timer fires when the watermark reaches it. */
export const EVENT_TIME: 0;
/** The processing-time domain: a timer fires when the host's clock reaches it. */
export const PROCESSING_TIME: 1;
/** The watermark before the first one: i64::MIN. */
export const NO_WATERMARK: bigint;
/** The watermark once every input has ended: i64::MAX. */
export const END_OF_TIME: bigint;

/** A time domain: `EVENT_TIME` or `PROCESSING_TIME`. */
export type TimeDomain = typeof EVENT_TIME | typeof PROCESSING_TIME;

/** A misuse of the SDK or of the Weir ABI; escaping a method, it fails the call. */
export class WeirError extends Error {
  constructor(message: string);
}

/** Who the instance is, and the operator's configuration. */
export class Context {
  constructor(
    operator?: string,
    options?: { subtask?: number; parallelism?: number; config?: BytesLike },
  );
  /** The operator's name in the job. */
  readonly operator: string;
  /** Which of the operator's instances this is, from 0. */
  readonly subtask: number;
  /** How many instances of the operator run. */
  readonly parallelism: number;
  /** The operator's `config` from the job file, as its bytes. */
  readonly config: Uint8Array;
  /** The configuration as UTF-8 text; throws a WeirError when it is not UTF-8. */
  configString(): string;
}

/** A batch of input records. */
export class Batch implements Iterable<Record> {
  /** The input the batch arrived on, from 0 in the order the job file lists them. */
  readonly port: number;
  /** How many records it holds (maybe none). */
  readonly length: number;
  /** The record at `index`, or undefined past the end. */
  get(index: number): Record | undefined;
  [Symbol.iterator](): IterableIterator<Record>;
}

/** Fired timers, all of one domain, in timestamp order, ties by key bytes. */
export class Timers implements Iterable<Timer> {
  readonly domain: TimeDomain;
  readonly length: number;
  get(index: number): Timer | undefined;
  [Symbol.iterator](): IterableIterator<Timer>;
}

/**
 * One value per key, kept on the host under a state number (docs/STATE.md); JSON by default.
 * `undefined` is no value.
 */
export class ValueState<T = any> {
  constructor(
    state: number,
    serializer?: { serialize(value: T): Uint8Array; deserialize(bytes: Uint8Array): T },
  );
  readonly state: number;
  getMany(out: Output, keys: Iterable<Uint8Array | string>): (T | undefined)[];
  get(out: Output, key: Uint8Array | string): T | undefined;
  putMany(out: Output, entries: Iterable<[Uint8Array | string, T | undefined]>): void;
  put(out: Output, key: Uint8Array | string, value: T | undefined): void;
  delete(out: Output, key: Uint8Array | string): void;
}

/** Where an operator's records go, and its handle on the host's timers and clocks. */
export class Output {
  /** Emits one record on the main output. */
  emit(key: BytesLike, value: BytesLike, timestamp: Timestamp): void;
  /** Emits one record on the side output `name` (1 to 255 bytes of UTF-8). */
  emitTo(name: string, key: BytesLike, value: BytesLike, timestamp: Timestamp): void;
  /** Sets a timer (not in finish; the timestamp must be 0 or more). */
  setTimer(domain: TimeDomain, timestamp: Timestamp, key: BytesLike): void;
  /** Deletes a timer, if it is set. */
  deleteTimer(domain: TimeDomain, timestamp: Timestamp, key: BytesLike): void;
  /** The task's watermark; NO_WATERMARK before the first. */
  watermark(): Timestamp;
  /** The host's clock, in milliseconds since the Unix epoch. */
  processingTime(): Timestamp;
}

/** The class an operator extends; only `process` must be written. Methods are synchronous. */
export class Operator {
  constructor(ctx: Context);
  /** The context the instance was made with; not part of the state. */
  readonly ctx: Context;
  process(batch: Batch, out: Output): void;
  onTimers(timers: Timers, out: Output): void;
  onWatermark(watermark: Timestamp, out: Output): void;
  finish(out: Output): void;
  checkpointComplete(checkpointId: number | bigint): void;
  /** Default: UTF-8 JSON of the own enumerable properties not starting with `_`. */
  snapshot(): Uint8Array;
  /** Default: assigns back what the default snapshot holds. */
  restore(state: Uint8Array): void;
}

/** Writes a line to the job's log: the parts joined by spaces, non-strings as JSON. */
export const log: {
  readonly error: (...parts: unknown[]) => void;
  readonly warn: (...parts: unknown[]) => void;
  readonly info: (...parts: unknown[]) => void;
  readonly debug: (...parts: unknown[]) => void;
  readonly trace: (...parts: unknown[]) => void;
};

/** The bytes as a string of one character U+0000–U+00FF per byte: a JSON-able Map/object key. */
export function bytesKey(bytes: Uint8Array): string;
/** The bytes a bytesKey string stands for. */
export function keyBytes(key: string): Uint8Array;
/** The UTF-8 encoding of `text`. */
export function utf8(text: string): Uint8Array;
/** The bytes decoded as UTF-8; throws a WeirError when they are not UTF-8. */
export function text(bytes: Uint8Array): string;
