// Why this module exists: who an operator instance is and how the job configured it, from the
// host's init message (docs/ABI.md §6), in the form tests build too.

import { WeirError } from './errors.js';
import { describeType, text, toBytes } from './bytes.js';

/** Who the instance is, and the operator's configuration; given to the operator's constructor. */
export class Context {
  /**
   * @param {string} [operator] the operator's name in the job
   * @param {object} [options]
   * @param {number} [options.subtask] which of the operator's instances this is, from 0
   * @param {number} [options.parallelism] how many instances of the operator run
   * @param {Uint8Array | string} [options.config] the operator's `config` from the job file
   *   (a string is taken as its UTF-8)
   */
  constructor(operator = 'operator', { subtask = 0, parallelism = 1, config = new Uint8Array(0) } = {}) {
    if (typeof operator !== 'string') {
      throw new WeirError(`Context: the operator name must be a string, not ${describeType(operator)}`);
    }
    for (const [name, value] of [['subtask', subtask], ['parallelism', parallelism]]) {
      if (!Number.isInteger(value) || value < 0 || value > 0xffffffff) {
        throw new WeirError(`Context: ${name} must be an integer from 0 to 2^32 - 1, not ${String(value)}`);
      }
    }
    if (subtask >= parallelism) {
      throw new WeirError(
        `Context: subtask ${subtask} is not below the parallelism ${parallelism} (subtasks count from 0)`,
      );
    }
    /** The operator's name in the job. @type {string} */
    this.operator = operator;
    /** Which of the operator's instances this is, from 0. @type {number} */
    this.subtask = subtask;
    /** How many instances of the operator run. @type {number} */
    this.parallelism = parallelism;
    /** The operator's `config` from the job file, as its bytes. @type {Uint8Array} */
    this.config = toBytes(config, 'Context: config');
  }

  /**
   * The configuration as text. Throws a `WeirError` when it is not UTF-8.
   * @returns {string}
   */
  configString() {
    try {
      return text(this.config);
    } catch {
      throw new WeirError(`the config of operator \`${this.operator}\` is not UTF-8`);
    }
  }
}

/**
 * The context of an init message, as the component bindings give it.
 *
 * @param {{ operator: string, subtask: number, parallelism: number, config: Uint8Array }} message
 * @returns {Context}
 */
export function contextFromInit(message) {
  return new Context(message.operator, {
    subtask: message.subtask,
    parallelism: message.parallelism,
    config: message.config,
  });
}

/**
 * The init message for `context`, as the host sends it.
 *
 * @param {Context} context
 * @returns {{ operator: string, subtask: number, parallelism: number, config: Uint8Array }}
 */
export function initMessage(context) {
  return {
    operator: context.operator,
    subtask: context.subtask,
    parallelism: context.parallelism,
    config: context.config.slice(),
  };
}
