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
 * the file, the line and the column). A thrown non-Error value is shown as it is. The host adds
 * the operator, the subtask and the call itself.
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
      text += '\n' + (stack.startsWith(text) ? stack.slice(text.length).replace(/^\n/, '') : stack);
    }
  } else {
    text = `uncaught ${typeof error}: ${safeString(error)}`;
  }
  return text;
}

/** `String(value)`, or a placeholder for a value whose conversion itself throws. */
function safeString(value) {
  try {
    return String(value);
  } catch {
    return '(a value that cannot be shown as text)';
  }
}
