// Why this module exists: the component bindings of componentize-js speak the WIT interface
// `host` with enum cases as strings; the SDK speaks time domains as their codes (the port of a
// timer batch). This adapter is all that lies between them, kept apart from src/component.js
// so that it can be tested under plain Node.

/** The WIT `time-domain` case of a domain code. */
const DOMAINS = ['event', 'processing'];

/**
 * The SDK's Host (src/output.js) over the functions imported from `weir:operator/host@1.1.0`.
 *
 * s64 values: the bindings of componentize-js 0.23.0 read an s64 from the host as unsigned (a
 * BigInt modulo 2^64), which the SDK reads back as signed everywhere (src/time.js), and trap
 * on a negative s64 sent to the host, which Output refuses with a message before it gets here.
 *
 * @param {object} wit the module namespace of `weir:operator/host@1.1.0`
 * @param {object} [keyed] that of `weir:operator/keyed-state@1.1.0`, in a component of the
 *   world `keyed-operator`
 * @returns {import('./output.js').Host}
 */
export function hostOf(wit, keyed) {
  return {
    stateGet: keyed && ((request) => keyed.stateGet(request)),
    stateWrite: keyed && ((request) => keyed.stateWrite(request)),
    emit: (batch) => wit.emit(batch),
    emitTo: (name, batch) => wit.emitTo(name, batch),
    timerSet: (domain, timestamp, key) => wit.timerSet(DOMAINS[domain], timestamp, key),
    timerDelete: (domain, timestamp, key) => wit.timerDelete(DOMAINS[domain], timestamp, key),
    currentTime: (domain) => wit.currentTime(DOMAINS[domain]),
    log: (level, message) => wit.log(level, message),
  };
}
