// The hostile guest of the isolation tests: what `process` does on the first batch is chosen by
// the operator's config, so one component (12 MB, seconds to build and to compile) serves every
// case. Build: bash guest-sdk/js/build.sh hostile.wasm tests/guests/js/hostile.js
//
// - `loop`: never returns. Nothing in the engine inside the component interrupts it: the host
//   must stop it at its call time limit (`limits.call_timeout`, docs/ABI.md §9).
// - `allocate`: keeps every object it makes, without bound. Observed under Node with
//   componentize-js 0.23.0: the engine gives up at about a million live small objects, writing
//   "out of memory" to its stderr and trapping, its linear memory grown from 9 MiB to 83 MiB. A
//   host whose `limits.max_memory` is lower stops it first, when memory would grow past it.
// - `fetch`: tries to reach the outside. A component has no file or socket API (componentize-js
//   provides no `fs` or `net`, no `require` or `process`); `fetch` exists as a global, but the
//   SDK builds without componentize-js's `http` feature, so the component imports no wasi:http
//   and calling it traps at once inside the engine — there is no promise to await and nothing
//   to catch. Only if it returned would the guest emit `reached`: the breach a test looks for.

import { Operator, WeirError, log } from '../../../guest-sdk/js/index.js';

const BEHAVIOURS = ['loop', 'allocate', 'fetch'];

export default class Hostile extends Operator {
  constructor(ctx) {
    super(ctx);
    this.behaviour = ctx.configString();
    if (!BEHAVIOURS.includes(this.behaviour)) {
      throw new WeirError(`unknown behaviour ${JSON.stringify(this.behaviour)}`);
    }
  }

  process(batch, out) {
    if (this.behaviour === 'loop') {
      let spins = 0;
      for (;;) spins++;
    } else if (this.behaviour === 'allocate') {
      const kept = [];
      for (let i = 0; ; i++) kept.push([`item ${i}`, i]);
    } else {
      log.info(`fetch is ${typeof fetch}`);
      const response = fetch('http://127.0.0.1:9/');
      log.error(`fetch returned ${String(response)} instead of failing`);
      out.emit('reached', 'the outside', 0);
    }
  }
}
