// Why this module exists: operators write to the job's log through the host (tagged with the
// operator and subtask), not through a console the host may not show. In a component the
// sink is the host's `log` import; under Node, before any guest call, it is `console.error`.

/** @typedef {'error' | 'warn' | 'info' | 'debug' | 'trace'} Level */

/** @type {(level: Level, message: string) => void} */
let sink = (level, message) => console.error(`[${level}] ${message}`);

/**
 * Where log lines go from now on: the SDK sets it to the host's `log` before every call.
 * @param {(level: Level, message: string) => void} next
 */
export function setLogSink(next) {
  sink = next;
}

/** One part of a message as text: strings as they are, other values as JSON when they can be. */
function show(part) {
  if (typeof part === 'string') return part;
  if (part instanceof Error) return part.stack ? `${part.name}: ${part.message}\n${part.stack}` : String(part);
  if (typeof part === 'object' && part !== null) {
    try {
      return JSON.stringify(part, (_, v) => (typeof v === 'bigint' ? `${v}n` : v));
    } catch {
      return String(part);
    }
  }
  return typeof part === 'bigint' ? `${part}n` : String(part);
}

/** @param {Level} level */
function logger(level) {
  return (...parts) => sink(level, parts.map(show).join(' '));
}

/**
 * Writes a line to the job's log, tagged with the operator and the subtask: the parts joined
 * by spaces, strings as they are and other values as JSON.
 */
export const log = Object.freeze({
  /** A failure or something that needs attention. */
  error: logger('error'),
  /** Something unexpected that does not stop the operator. */
  warn: logger('warn'),
  /** What the operator is doing. */
  info: logger('info'),
  /** Detail for debugging. */
  debug: logger('debug'),
  /** Finer detail still. */
  trace: logger('trace'),
});
