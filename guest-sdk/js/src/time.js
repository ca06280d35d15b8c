// Why this module exists: Weir's timestamps are i64 milliseconds, and JavaScript has no i64.
// A timestamp is a Number when it is a safe integer (|t| ≤ 2^53 − 1, every realistic time) and
// a BigInt otherwise (i64::MIN, i64::MAX and their neighbours), so every i64 round-trips exactly
// while ordinary times stay Numbers. This module holds the constants and the conversions.

import { WeirError } from './errors.js';
import { describeType } from './bytes.js';

/** The event-time domain (docs/ABI.md §15): a timer fires when the watermark reaches it. */
export const EVENT_TIME = 0;

/** The processing-time domain: a timer fires when the host's clock (ms since 1970) reaches it. */
export const PROCESSING_TIME = 1;

/** The watermark before the first one arrives: i64::MIN, as a BigInt. */
export const NO_WATERMARK = -(2n ** 63n);

/** The watermark once every input has ended, and the largest timestamp: i64::MAX, as a BigInt. */
export const END_OF_TIME = 2n ** 63n - 1n;

const TWO_POW_32 = 4294967296;

/**
 * An i64 given as a BigInt (which may come unsigned from the component bindings: it is read
 * modulo 2^64), as a timestamp: a Number when safe, a BigInt otherwise.
 *
 * @param {bigint} value
 * @returns {number | bigint}
 */
export function timestampFromBigInt(value) {
  const signed = BigInt.asIntN(64, value);
  const number = Number(signed);
  return Number.isSafeInteger(number) ? number : signed;
}

/**
 * A timestamp as a BigInt, checking that it is one: an integer Number that is safe, or a BigInt
 * in the i64 range.
 *
 * @param {number | bigint} timestamp
 * @param {string} what the argument, for the message
 * @returns {bigint}
 */
export function timestampToBigInt(timestamp, what) {
  checkTimestamp(timestamp, what);
  return BigInt(timestamp);
}

/**
 * Throws a `WeirError` unless `timestamp` is a timestamp: a safe integer Number (a larger one
 * has already lost its exact value), or a BigInt from i64::MIN to i64::MAX.
 *
 * @param {unknown} timestamp
 * @param {string} what the argument, for the message
 */
export function checkTimestamp(timestamp, what) {
  if (typeof timestamp === 'number') {
    if (Number.isSafeInteger(timestamp)) return;
    throw new WeirError(
      Number.isInteger(timestamp)
        ? `${what} ${timestamp} is past 2^53 as a Number, where it is no longer exact: pass it as a BigInt`
        : `${what} must be an integer number of milliseconds, not ${timestamp}`,
    );
  }
  if (typeof timestamp === 'bigint') {
    if (timestamp >= NO_WATERMARK && timestamp <= END_OF_TIME) return;
    throw new WeirError(`${what} ${timestamp} is outside the i64 range`);
  }
  throw new WeirError(`${what} must be a Number or a BigInt, not ${describeType(timestamp)}`);
}

/**
 * Reads the i64 at `offset` (little-endian) as a timestamp: a Number when safe, a BigInt
 * otherwise. Reading the two halves as Numbers avoids making a BigInt for every record.
 *
 * @param {DataView} view
 * @param {number} offset
 * @returns {number | bigint}
 */
export function readTimestamp(view, offset) {
  const low = view.getUint32(offset, true);
  const high = view.getInt32(offset + 4, true);
  // Exact whenever the true value is within ±(2^53 − 1); any larger one rounds to at least
  // 2^53 in magnitude, so the test below is exact too.
  const number = high * TWO_POW_32 + low;
  if (number >= -Number.MAX_SAFE_INTEGER && number <= Number.MAX_SAFE_INTEGER) return number;
  return view.getBigInt64(offset, true);
}

/**
 * Writes a checked timestamp at `offset` as a little-endian i64.
 *
 * @param {DataView} view
 * @param {number} offset
 * @param {number | bigint} timestamp
 */
export function writeTimestamp(view, offset, timestamp) {
  if (typeof timestamp === 'bigint') {
    view.setBigInt64(offset, timestamp, true);
    return;
  }
  const low = timestamp >>> 0; // ToUint32 is exact modulo 2^32 for every integer
  view.setUint32(offset, low, true);
  view.setInt32(offset + 4, (timestamp - low) / TWO_POW_32, true);
}
