// Why this module exists: the native harness (testing.js) runs an operator's JavaScript under
// Node; this runs the component built from it, the very bytes a job loads, in the same Harness.
// jco transpiles the component into core wasm modules and JavaScript bindings, which run the
// SpiderMonkey engine inside it in Node's own wasm engine, against the harness's emulated host.
// A test can then check that the component emits exactly what the native run emits.
//
// WASI: the component imports what componentize-js's engine needs (clocks, random, stdio,
// filesystem types); they come from @bytecodealliance/preview2-shim, except that the
// filesystem has no preopened directory, as in the host.

import { readFile } from 'node:fs/promises';
import { transpile } from '@bytecodealliance/jco';
import * as cli from '@bytecodealliance/preview2-shim/cli';
import * as clocks from '@bytecodealliance/preview2-shim/clocks';
import * as filesystem from '@bytecodealliance/preview2-shim/filesystem';
import * as io from '@bytecodealliance/preview2-shim/io';
import * as random from '@bytecodealliance/preview2-shim/random';

/** The time-domain code of a WIT `time-domain` case. */
const DOMAIN_CODES = { event: 0, processing: 1 };

/**
 * A built component, loaded for the Harness: `new Harness(await loadComponent(path), ctx)`
 * drives a fresh instance of it, through its real exports, wherever the Harness would make a
 * fresh operator instance.
 */
export class LoadedComponent {
  #instantiate;
  #modules;

  /** @private use loadComponent */
  constructor(instantiate, modules) {
    this.#instantiate = instantiate;
    this.#modules = modules;
  }

  /**
   * A fresh instance of the component talking to `host` (the SDK's Host, src/output.js):
   * its `guest` exports, failing with a thrown string as the SDK's own guest does.
   *
   * @param {import('./src/output.js').Host} host
   * @returns {import('./src/guest.js').Guest & { readonly operator: null }}
   */
  newGuest(host) {
    const imports = {
      'wasi:cli/stderr': cli.stderr,
      'wasi:cli/stdin': cli.stdin,
      'wasi:cli/stdout': cli.stdout,
      'wasi:cli/terminal-input': cli.terminalInput,
      'wasi:cli/terminal-output': cli.terminalOutput,
      'wasi:cli/terminal-stderr': cli.terminalStderr,
      'wasi:cli/terminal-stdin': cli.terminalStdin,
      'wasi:cli/terminal-stdout': cli.terminalStdout,
      'wasi:clocks/monotonic-clock': clocks.monotonicClock,
      'wasi:clocks/wall-clock': clocks.wallClock,
      'wasi:filesystem/preopens': { getDirectories: () => [] },
      'wasi:filesystem/types': filesystem.types,
      'wasi:io/error': io.error,
      'wasi:io/poll': io.poll,
      'wasi:io/streams': io.streams,
      'wasi:random/random': random.random,
      'weir:operator/host': witHost(host),
    };
    const { guest } = this.#instantiate((name) => this.#modules.get(name), imports);
    const call = (name) => (...args) => {
      try {
        return guest[name](...args);
      } catch (error) {
        // jco throws err(message) as a ComponentError carrying it; a trap as a RuntimeError.
        if (error !== null && typeof error === 'object' && 'payload' in error) throw String(error.payload);
        if (error instanceof WebAssembly.RuntimeError) throw `trap: ${error.message}`;
        throw error;
      }
    };
    return {
      operator: null,
      init: call('init'),
      restore: call('restore'),
      process: call('process'),
      onTimers: call('onTimers'),
      onWatermark: call('onWatermark'),
      finish: call('finish'),
      snapshot: call('snapshot'),
      checkpointComplete: call('checkpointComplete'),
    };
  }
}

/**
 * The WIT interface `host` over the SDK's Host, as jco's bindings call it: time domains as
 * enum cases, s64 as BigInts.
 */
function witHost(host) {
  return {
    emit: (batch) => host.emit(batch),
    emitTo: (name, batch) => host.emitTo(name, batch),
    timerSet: (domain, timestamp, key) => host.timerSet(DOMAIN_CODES[domain], BigInt.asIntN(64, timestamp), key),
    timerDelete: (domain, timestamp, key) => host.timerDelete(DOMAIN_CODES[domain], BigInt.asIntN(64, timestamp), key),
    currentTime: (domain) => host.currentTime(DOMAIN_CODES[domain]),
    log: (level, message) => host.log(level, message),
  };
}

/**
 * Loads a component built by build.sh, for the Harness.
 *
 * @param {string | URL} path the component's `.wasm` file
 * @returns {Promise<LoadedComponent>}
 */
export async function loadComponent(path) {
  const { files } = await transpile(await readFile(path), {
    name: 'component',
    instantiation: 'sync',
    noTypescript: true,
    quiet: true,
  });
  const modules = new Map();
  let bindings = null;
  for (const [name, bytes] of Object.entries(files)) {
    if (name.endsWith('.wasm')) modules.set(name, await WebAssembly.compile(bytes));
    else if (name === 'component.js') bindings = Buffer.from(bytes).toString('utf8');
  }
  if (bindings === null) throw new Error(`jco made no bindings for ${path}`);
  const { instantiate } = await import(`data:text/javascript;base64,${Buffer.from(bindings).toString('base64')}`);
  return new LoadedComponent(instantiate, modules);
}
