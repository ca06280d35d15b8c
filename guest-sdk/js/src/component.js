// Why this module exists: it is the only module that imports the host's WIT interface
// (`weir:operator/host@1.1.0`, which exists only inside a component), so everything else in
// the SDK stays importable in plain Node. The entry module that build.mjs generates calls
// `exportGuest` and exports the result as `guest`, the name componentize-js gives the WIT
// export `weir:operator/guest@1.1.0`.

import * as wit from 'weir:operator/host@1.1.0';
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
  return makeGuest(operatorClassOf(namespace, file), hostOf(wit));
}
