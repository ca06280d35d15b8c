// Why this module exists: the class an operator extends. Only `process` must be written; the
// other methods have defaults that do nothing, and the state is checkpointed by default as JSON
// of the instance's own properties (src/state.js), so a stateful operator needs no snapshot
// code at all.

import { WeirError } from './errors.js';
import { encodeState, restoreState } from './state.js';

/**
 * A stream operator. The host makes one instance per subtask, with `new YourOperator(ctx)`, and
 * calls it one call at a time: `process` for every batch, interleaved with checkpoints
 * (`snapshot`) and their completion notices, fired timers and watermark notices, and `finish`
 * once if every input ends. A method that throws fails the call and, with it, the job's
 * attempt; the job then restarts from its latest checkpoint. Methods must be synchronous.
 */
export class Operator {
  /**
   * @param {import('./context.js').Context} ctx who the instance is and its configuration;
   *   kept as `this.ctx`, which is not part of the state
   */
  constructor(ctx) {
    Object.defineProperty(this, 'ctx', { value: ctx, enumerable: false, writable: false });
  }

  /**
   * Handles one batch of input records; `batch.port` says which input it came from.
   * Subclasses must implement it.
   *
   * @param {import('./batch.js').Batch} batch
   * @param {import('./output.js').Output} out
   */
  process(batch, out) {
    throw new WeirError(`${this.constructor.name} does not implement process(batch, out)`);
  }

  /**
   * Timers the operator set fired: all of one domain (`timers.domain`), in timestamp order,
   * ties by key. It may emit, and set and delete timers. The default ignores them.
   *
   * @param {import('./batch.js').Timers} timers
   * @param {import('./output.js').Output} out
   */
  onTimers(timers, out) {}

  /**
   * The task's watermark advanced to `watermark`, after the event-time timers it fired and
   * before it goes downstream. At the end of the input it is `END_OF_TIME`, before `finish`.
   * The default does nothing.
   *
   * @param {number | bigint} watermark
   * @param {import('./output.js').Output} out
   */
  onWatermark(watermark, out) {}

  /**
   * Every input has ended: emit whatever is still held back. Timers cannot be set here. Not
   * called when the job is cancelled or fails. The default does nothing.
   *
   * @param {import('./output.js').Output} out
   */
  finish(out) {}

  /**
   * Every checkpoint up to and including `checkpointId` is durable. Best-effort: the host may
   * skip notices. The default does nothing.
   *
   * @param {number | bigint} checkpointId
   */
  checkpointComplete(checkpointId) {}

  /**
   * The operator's state, to be checkpointed. The default is UTF-8 JSON of the instance's own
   * enumerable properties whose names do not start with `_` (Maps, Sets, Uint8Arrays and
   * BigInts included); a property it cannot hold (a class instance, a function, NaN) fails
   * the checkpoint with a message naming it. Override it, with `restore`, for another format.
   *
   * @returns {Uint8Array}
   */
  snapshot() {
    return encodeState(this);
  }

  /**
   * Puts back the state of an earlier `snapshot`, into a fresh instance that the constructor
   * has just made. The default assigns the properties the default snapshot holds; the others
   * keep the constructor's values.
   *
   * @param {Uint8Array} state
   */
  restore(state) {
    restoreState(this, state);
  }
}
