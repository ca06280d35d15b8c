// The operator the component tests run both natively and as a component, to compare the two:
// each record's value is a command for its key.
//
//   set E|P T    sets a timer          del E|P T   deletes one
//   side NAME    emits on a side output
//   fail         throws an Error       negative    sets a timer before 1970
//   log TEXT     logs TEXT             echo        emits the record as it came
//   ambient      logs what the sandbox offers: clocks, randomness, Node's globals
//
// Fired timers come out as records `fired DOMAIN at WATERMARK`; `onWatermark` and `finish`
// emit a record each. The state (the commands seen) is the default JSON.

import { EVENT_TIME, Operator, PROCESSING_TIME, bytesKey, log, text } from '../index.js';

export default class Probe extends Operator {
  constructor(ctx) {
    super(ctx);
    this.seen = new Map();
    this.config = ctx.configString();
  }

  process(batch, out) {
    for (const { key, value, timestamp } of batch) {
      const [command, ...rest] = text(value).split(' ');
      this.seen.set(command, (this.seen.get(command) ?? 0) + 1);
      const domain = rest[0] === 'P' ? PROCESSING_TIME : EVENT_TIME;
      switch (command) {
        case 'set':
          out.setTimer(domain, Number(rest[1]), key);
          break;
        case 'del':
          out.deleteTimer(domain, Number(rest[1]), key);
          break;
        case 'side':
          out.emitTo(rest[0], key, bytesKey(key), timestamp);
          break;
        case 'fail':
          throw new Error(`asked to fail at ${timestamp}`);
        case 'negative':
          out.setTimer(EVENT_TIME, -1, key);
          break;
        case 'log':
          log.info(rest.join(' '), { port: batch.port });
          break;
        case 'ambient': {
          const random = Math.random();
          log.info(
            `now ${Date.now() > 1.6e12} random ${random >= 0 && random < 1} ` +
              `process ${typeof globalThis.process} require ${typeof globalThis.require} fetch ${typeof fetch}`,
          );
          break;
        }
        case 'echo':
          out.emit(key, value, timestamp);
          break;
        default:
          throw new Error(`unknown command ${text(value)}`);
      }
    }
  }

  onTimers(timers, out) {
    for (const { key, timestamp } of timers) {
      out.emit(key, `fired ${timers.domain === EVENT_TIME ? 'event' : 'processing'} at ${out.watermark()}`, timestamp);
    }
  }

  onWatermark(watermark, out) {
    out.emit('watermark', String(watermark), watermark);
  }

  finish(out) {
    out.emit('finish', this.config, 0);
  }
}
