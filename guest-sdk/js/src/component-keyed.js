// Why this module exists: the component glue of src/component.js for an operator that keeps
// keyed state on the host (ValueState): it imports the interface `keyed-state` besides `host`,
// which exists only in a component of the world `keyed-operator`. build.mjs uses it, and that
// world, when a file beside the operator mentions ValueState.

import * as wit from 'weir:operator/host@1.1.0';
import * as keyed from 'weir:operator/keyed-state@1.1.0';
import { makeGuest, operatorClassOf } from './guest.js';
import { hostOf } from './wit.js';

/**
 * The `guest` export for the operator of a user's module.
 *
 * @param {Record<string, unknown>} namespace the user's module's exports
 * @param {string} file the user's module, for messages
 * @returns {import('./guest.js').Guest}
 */
export function exportGuest(namespace, file) {
  return makeGuest(operatorClassOf(namespace, file), hostOf(wit, keyed));
}
