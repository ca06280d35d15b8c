// Why this file exists: the types of the SDK's native test harness (testing.js) for
// TypeScript users and editors.

import type { BytesLike, Context, Operator, Record, TimeDomain, Timer, Timestamp } from './index.js';
import type { LoadedComponent } from './testing-component.js';

/** A record to push: key and value as bytes or strings. */
export interface RecordLike {
  key: BytesLike;
  value: BytesLike;
  timestamp: Timestamp;
}

/** Most timers one on-timers call gets: 1024. */
export const MAX_TIMERS_PER_CALL: number;
/** Most rounds of firing per advance of time: 64. */
export const MAX_FIRING_ROUNDS: number;

/** A record with strings as UTF-8, and the timestamp as the SDK gives it. */
export function record(key: BytesLike, value?: BytesLike, timestamp?: Timestamp): Record;

/** Records encoded as a batch arriving on `port` (docs/ABI.md §5). */
export function encodeBatch(port: number, records: Iterable<RecordLike>): Uint8Array;

/** A checkpoint of one instance (Harness#checkpoint); its fields are the harness's. */
export interface Checkpoint {
  readonly state: Uint8Array;
}

/** An operator's method failed: the call, and the message the host would report. */
export class OperatorError extends Error {
  readonly call: string;
  readonly operatorMessage: string;
}

/** One operator instance (or component instance), driven the way the host drives it. */
export class Harness<T extends Operator = Operator> {
  constructor(subject: (new (ctx: Context) => T) | LoadedComponent, ctx?: Context);
  /** The instance under test (null for a component). */
  readonly operator: T | null;
  readonly context: Context;
  readonly logs: { level: string; message: string }[];
  push(key: BytesLike, value?: BytesLike, timestamp?: Timestamp): Record[];
  pushOn(port: number, records: Iterable<RecordLike>): Record[];
  pushBatch(bytes: Uint8Array): Record[];
  pushBatchEncoded(bytes: Uint8Array): Uint8Array[];
  advanceWatermark(watermark: Timestamp): Record[];
  advanceProcessingTime(time: Timestamp): Record[];
  finish(): Record[];
  checkpointComplete(checkpointId: number | bigint): void;
  snapshot(): Uint8Array;
  restoreIntoFresh(state: Uint8Array): void;
  snapshotAndRestore(): void;
  /** A checkpoint as the host takes it: the snapshot, timers, watermark and keyed state. */
  checkpoint(): Checkpoint;
  /** A fresh instance restored from `checkpoint`, with the host's state as it was then. */
  restoreCheckpoint(checkpoint: Checkpoint): void;
  /** The keyed state kept on the host (ValueState), as [state, key, value] entries. */
  keyedState(): [number, Uint8Array, Uint8Array][];
  /** The subtasks' checkpoints split by key group for `parallelism` subtasks, as the host does. */
  static rescale<T extends Operator>(
    subject: new (ctx: Context) => T,
    ctx: Context,
    checkpoints: Checkpoint[],
    parallelism: number,
    maxParallelism?: number,
  ): Harness<T>[];
  sideOutput(name: string): Record[];
  sideOutputNames(): string[];
  watermark(): Timestamp;
  processingTime(): Timestamp;
  pendingTimers(domain: TimeDomain): Timer[];
}

/** Asserts two record lists are equal, with a readable diff. */
export function assertRecordsEqual(actual: Record[], expected: Record[]): void;

/** Asserts that restoring into a fresh instance after every `every` records changes no output. */
export function assertRestorePreservesOutput(
  subject: (new (ctx: Context) => Operator) | LoadedComponent,
  ctx: Context,
  records: Iterable<RecordLike>,
  every: number,
): void;
