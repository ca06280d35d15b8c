// Why this module exists: it is the guest side of the WIT interface `guest`
// (abi/wit/operator.wit) for one Operator class, in plain JavaScript: the component glue
// exports what `makeGuest` returns, and the test harness drives the very same object, so a
// test goes through the same decoding, snapshot code (JSON) and error handling as a job.
//
// Bytes from the bindings are made views of this realm first (src/bytes.js, hostBytes).
//
// Every export fails the way componentize-js maps to `err(message)`: by throwing a string.
// (Throwing an Error object from an export traps the component instead, so every exception an
// operator throws is caught here and turned into its message and stack.)

import { WeirError, describeError } from './errors.js';
import { describeType, hostBytes } from './bytes.js';
import { Batch, decodeBatch, decodeTimers } from './batch.js';
import { contextFromInit } from './context.js';
import { Operator } from './operator.js';
import { BEGIN, DISCARD, END, FLUSH, Output } from './output.js';
import { setLogSink } from './log.js';
import { timestampFromBigInt } from './time.js';

/**
 * @typedef {object} Guest The exports of the WIT interface `guest`, as componentize-js calls
 *   them: u64 and s64 as BigInts, `list<u8>` as Uint8Array, `err(message)` as a thrown string.
 * @property {(message: { operator: string, subtask: number, parallelism: number, config: Uint8Array }) => void} init
 * @property {(batch: Uint8Array) => void} process
 * @property {(checkpointId: bigint) => Uint8Array} snapshot
 * @property {(state: Uint8Array) => void} restore
 * @property {(checkpointId: bigint) => void} checkpointComplete
 * @property {(timers: Uint8Array) => void} onTimers
 * @property {(watermark: bigint) => void} onWatermark
 * @property {() => void} finish
 */

/**
 * Throws a `WeirError` unless `OperatorClass` is a subclass of `Operator`.
 *
 * @param {unknown} OperatorClass
 * @param {string} what where it came from, for the message
 */
export function checkOperatorClass(OperatorClass, what) {
  if (typeof OperatorClass !== 'function' || !(OperatorClass.prototype instanceof Operator)) {
    throw new WeirError(
      `${what} is ${describeType(OperatorClass)}, not a subclass of Operator ` +
        '(class MyOperator extends Operator { process(batch, out) { ... } })',
    );
  }
}

/**
 * The Operator subclass of a user's module: its default export, or else its one exported
 * subclass of Operator.
 *
 * @param {Record<string, unknown>} namespace the module's exports
 * @param {string} file the module, for messages
 * @returns {typeof Operator}
 */
export function operatorClassOf(namespace, file) {
  if (namespace.default !== undefined) {
    checkOperatorClass(namespace.default, `the default export of ${file}`);
    return /** @type {typeof Operator} */ (namespace.default);
  }
  const found = Object.entries(namespace).filter(
    ([, value]) => typeof value === 'function' && value.prototype instanceof Operator,
  );
  if (found.length === 1) return /** @type {typeof Operator} */ (found[0][1]);
  throw new WeirError(
    found.length === 0
      ? `${file} exports no subclass of Operator: export your operator class, as the default ` +
          'export or as its only exported Operator subclass'
      : `${file} exports several subclasses of Operator (${found.map(([name]) => name).join(', ')}) ` +
          'and no default export: make the one to run the default export',
  );
}

/**
 * The `guest` exports for one instance of `OperatorClass`, talking to `host`.
 *
 * @param {typeof Operator} OperatorClass
 * @param {import('./output.js').Host} host
 * @returns {Guest & { readonly operator: Operator | null }}
 */
export function makeGuest(OperatorClass, host) {
  checkOperatorClass(OperatorClass, 'the operator class');
  const output = new Output(host);
  const logToHost = (level, message) => host.log(level, message);
  /** @type {Operator | null} */
  let operator = null;
  /** Whether `restore` may still come: right after `init`, before any other call. */
  let restorable = false;
  /** The first failed call's message: the host never calls a failed instance again. */
  let failure = null;

  /**
   * Runs one export: the log goes to this host, an exception fails the call with its message
   * (and drops what the call emitted), and a failed instance refuses every later call.
   */
  function run(call, body) {
    setLogSink(logToHost);
    if (failure !== null) {
      throw `${call}: the instance already failed (${failure.split('\n')[0]}); the host never calls a failed instance again`;
    }
    if (call !== 'init' && operator === null) {
      failure = `${call} was called before init`;
      throw failure;
    }
    try {
      const result = body();
      restorable = call === 'init';
      return result;
    } catch (error) {
      output[DISCARD]();
      failure = describeError(error);
      throw failure;
    } finally {
      output[END]();
    }
  }

  /**
   * Calls the operator's `method` with `args` and then the Output, then hands the host what it
   * emitted.
   */
  function emitting(method, ...args) {
    output[BEGIN](method);
    synchronous(method, operator[method](...args, output));
    output[FLUSH]();
  }

  return {
    get operator() {
      return operator;
    },

    init(message) {
      run('init', () => {
        if (operator !== null) throw new WeirError('init was called twice');
        operator = new OperatorClass(
          contextFromInit({ ...message, config: hostBytes(message.config, 'the init message config') }),
        );
      });
    },

    restore(state) {
      run('restore', () => {
        if (!restorable) {
          throw new WeirError('restore is only allowed right after init, before any other call');
        }
        synchronous('restore', operator.restore(hostBytes(state, 'the state to restore')));
      });
    },

    process(bytes) {
      run('process', () => {
        const { port, records } = decodeBatch(hostBytes(bytes, 'the input batch'), 'input batch');
        emitting('process', new Batch(port, records));
      });
    },

    onTimers(bytes) {
      run('onTimers', () => emitting('onTimers', decodeTimers(hostBytes(bytes, 'the timer batch'))));
    },

    onWatermark(watermark) {
      run('onWatermark', () => emitting('onWatermark', timestampFromBigInt(watermark)));
    },

    finish() {
      run('finish', () => emitting('finish'));
    },

    snapshot() {
      return run('snapshot', () => {
        const state = operator.snapshot();
        synchronous('snapshot', state);
        if (!(state instanceof Uint8Array)) {
          throw new WeirError(`snapshot() must return a Uint8Array, not ${describeType(state)}`);
        }
        return state;
      });
    },

    checkpointComplete(checkpointId) {
      run('checkpointComplete', () => {
        synchronous('checkpointComplete', operator.checkpointComplete(checkpointNumber(checkpointId)));
      });
    },
  };
}

/**
 * A u64 checkpoint id as the operator gets it: a Number when it is a safe integer (always, in
 * practice), a BigInt otherwise.
 *
 * @param {bigint} id
 * @returns {number | bigint}
 */
function checkpointNumber(id) {
  const unsigned = BigInt.asUintN(64, id);
  return unsigned <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(unsigned) : unsigned;
}

/** Throws a `WeirError` when an operator method returned a promise: the calls are synchronous. */
function synchronous(method, result) {
  if (result !== null && typeof result === 'object' && typeof result.then === 'function') {
    throw new WeirError(
      `${method} returned a Promise: operator methods must be synchronous (no async, no await), ` +
        'since what they emit is handed to the host when they return',
    );
  }
}
