// Why this module exists: one error type for every misuse of the SDK, and one way to turn
// whatever an operator throws into the message the host reports (docs/ABI.md §8).

/**
 * A misuse of the SDK or of the Weir ABI: a bad argument, a call the ABI forbids where it was
 * made, a malformed batch or snapshot. Thrown by the SDK; when it escapes an operator's method
 * it fails the host's call with its message, like any other exception.
 */
export class WeirError extends Error {
  /** @param {string} message what went wrong, and how to fix it when that is known */
  constructor(message) {
    super(message);
    this.name = 'WeirError';
  }
}

/**
 * The message the host reports for an exception an operator threw: `name: message`, then the
 * JavaScript stack when there is one (SpiderMonkey's and V8's stacks both name the function,
 * the file, the line and the column), its places in the bundle mapped back to the operator's
 * own files (mapStack). A thrown non-Error value is shown as it is. The host adds the operator,
 * the subtask and the call itself.
 *
 * @param {unknown} error what was thrown
 * @returns {string}
 */
export function describeError(error) {
  let text;
  if (error instanceof Error) {
    text = `${error.name}: ${error.message}`;
    const stack = typeof error.stack === 'string' ? error.stack.trim() : '';
    if (stack !== '') {
      // V8 starts its stack with the `name: message` line; SpiderMonkey's is frames only.
      text += '\n' + mapStack(stack.startsWith(text) ? stack.slice(text.length).replace(/^\n/, '') : stack);
    }
  } else {
    text = `uncaught ${typeof error}: ${safeString(error)}`;
  }
  return text;
}

/**
 * `stack` with every place in the component's bundle (`operator.js:LINE:COLUMN`) replaced by the
 * place in the source it came from, through the line table build.mjs appends to the bundle. Under
 * Node, which runs the sources themselves, there is no table and the stack is returned as it is;
 * so is a place the table does not cover.
 *
 * @param {string} stack
 * @returns {string}
 */
export function mapStack(stack) {
  const table = globalThis[Symbol.for('weir.sourceMap')];
  if (!table) return stack;
  // The bundle's name, after any directory: `process@operator.js:981:33`.
  const name = table.file.replace(/\./g, '\\.');
  const place = new RegExp(`(^|[@\\s(])(?:[^\\s@()]*/)?${name}:(\\d+):(\\d+)`, 'gm');
  return stack.replace(place, (whole, before, line, column) => {
    const segments = table.lines[Number(line) - 1];
    if (!segments || segments.length === 0) return whole;
    // The engine counts columns from 1, the table from 0: the last segment at or before it.
    let at = 0;
    for (let i = 0; i < segments.length; i += 4) {
      if (segments[i] <= Number(column) - 1) at = i;
    }
    const [, source, sourceLine, sourceColumn] = segments.slice(at, at + 4);
    return `${before}${table.sources[source]}:${sourceLine + 1}:${sourceColumn + 1}`;
  });
}

/** `String(value)`, or a placeholder for a value whose conversion itself throws. */
function safeString(value) {
  try {
    return String(value);
  } catch {
    return '(a value that cannot be shown as text)';
  }
}
