// Why this module exists: the public face of the Weir JavaScript SDK, importable in plain
// Node (for tests) and inside a component alike. See README.md.

export { Operator } from './src/operator.js';
export { Context } from './src/context.js';
export { Batch, Timers } from './src/batch.js';
export { Output } from './src/output.js';
export { ValueState } from './src/keyed.js';
export { WeirError } from './src/errors.js';
export { log } from './src/log.js';
export { bytesKey, keyBytes, text, utf8 } from './src/bytes.js';
export { EVENT_TIME, PROCESSING_TIME, NO_WATERMARK, END_OF_TIME } from './src/time.js';
