/*
 * The Weir job dashboard.
 *
 * Served by a running job's control endpoint next to index.html and
 * style.css. It polls the JSON API once a second (GET /api/job and
 * GET /api/checkpoints; the checkpoint configuration once), redraws the page
 * from the answers, fetches one checkpoint's per-task figures
 * (GET /api/checkpoints/{id}) when its history row is opened, and posts the
 * three actions (POST /api/savepoints, /api/stop, /api/cancel).
 *
 * When the job ends (FINISHED, CANCELED, FAILED) or its endpoint stops
 * answering, polling stops instead of hammering a server that is gone.
 *
 * The page is let in by a session cookie (HttpOnly, SameSite=Strict) that
 * the endpoint sets when the one-time link `weir run` logs (or
 * `weir dashboard DIR` prints), /login?once=CODE, is opened; it then
 * redirects here, so the address holds no secret. Same-origin fetches send
 * the cookie; every call also carries `X-Weir-Request: 1`, which the
 * endpoint requires of actions (a cross-site form cannot send it).
 * `#checkpoint=ID` in the address opens that checkpoint's details on load.
 *
 * Plain browser JavaScript, no dependencies and no build step: the file is
 * embedded in the weir binary as it is. Everything lives inside this one
 * function; the page's only mutable state is the `state` object below.
 */
(function () {
  'use strict';

  // ---------------------------------------------------------------------------
  // Settings

  /** Time between two polls while the job runs. */
  const POLL_MS = 1000;
  /** Longest wait between two attempts while the endpoint does not answer. */
  const MAX_BACKOFF_MS = 8000;
  /** Failed polls in a row after which the page stops trying on its own. */
  const GIVE_UP_AFTER = 5;
  /** Job statuses after which nothing changes any more. */
  const TERMINAL = new Set(['FINISHED', 'CANCELED', 'FAILED']);
  /** The colour family of each job status (see .status-pill in style.css). */
  const STATUS_TONE = {
    RUNNING: 'ok',
    CREATED: 'warn',
    INITIALIZING: 'warn',
    RESTARTING: 'warn',
    FAILING: 'bad',
    CANCELING: 'warn',
    STOPPING: 'warn',
    FINISHED: 'ended',
    CANCELED: 'ended',
    FAILED: 'bad',
  };
  const SVG_NS = 'http://www.w3.org/2000/svg';

  /** Everything the page knows; only the functions below change it. */
  const state = {
    /** The last answer of /api/job. */
    job: null,
    /** The last answer of /api/checkpoints. */
    checkpoints: null,
    /** The answer of /api/checkpoints/config, once it came. */
    config: null,
    /** Ids of the checkpoints whose details are open. */
    expanded: new Set(),
    /** Per-checkpoint details by id: {status, data} or {status, error} or {loading}. */
    details: new Map(),
    /** The id to scroll to once its row exists (from #checkpoint=ID). */
    scrollTo: null,
    /** Failed polls in a row. */
    failures: 0,
    /** Wall-clock time of the last successful poll. */
    lastAnswer: 0,
    /** Why polling stopped: null while it runs, 'ended' or 'unreachable'. */
    stopped: null,
    /** The pending poll's timer. */
    timer: null,
    /** The action being confirmed or run ('savepoint', 'stop', 'cancel'). */
    action: null,
    /** Whether an action's request is on its way. */
    actionBusy: false,
    /** The signature of the history last drawn, to skip identical redraws. */
    historySignature: '',
  };

  // ---------------------------------------------------------------------------
  // The API

  /** An error answer of the endpoint (HTTP status and its message). */
  class ApiError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  /** Calls the endpoint: `method` on `path`, returning the parsed JSON answer. */
  async function request(method, path) {
    const headers = { Accept: 'application/json', 'X-Weir-Request': '1' };
    const response = await fetch(path, {
      method,
      headers,
      cache: 'no-store',
      credentials: 'same-origin',
    });
    const text = await response.text();
    let body = null;
    try {
      body = text ? JSON.parse(text) : null;
    } catch (_) {
      body = null;
    }
    if (!response.ok) {
      const message = body && body.error ? body.error : text || response.statusText;
      throw new ApiError(response.status, message);
    }
    return body;
  }

  const api = {
    job: () => request('GET', '/api/job'),
    checkpoints: () => request('GET', '/api/checkpoints'),
    checkpoint: (id) => request('GET', '/api/checkpoints/' + encodeURIComponent(id)),
    config: () => request('GET', '/api/checkpoints/config'),
    savepoint: () => request('POST', '/api/savepoints'),
    stop: () => request('POST', '/api/stop'),
    cancel: () => request('POST', '/api/cancel'),
  };

  // ---------------------------------------------------------------------------
  // Formatting

  /** Between a number and its unit, so that the two never part at a line break. */
  const NBSP = '\u00a0';

  /** Milliseconds as "45 ms", "2.35 s", "3 min 12 s", "2 h 5 min", "1 d 4 h". */
  function fmtDuration(ms) {
    if (ms == null || !Number.isFinite(ms)) return '–';
    if (ms < 1000) return Math.round(ms) + NBSP + 'ms';
    const s = ms / 1000;
    if (s < 60) return parseFloat(s < 10 ? s.toFixed(2) : s.toFixed(1)) + NBSP + 's';
    const minutes = Math.floor(s / 60);
    const hours = Math.floor(minutes / 60);
    const days = Math.floor(hours / 24);
    const pair = (big, bigUnit, small, smallUnit) => big + NBSP + bigUnit + (small ? ' ' + small + NBSP + smallUnit : '');
    if (hours === 0) return pair(minutes, 'min', Math.floor(s % 60), 's');
    if (days === 0) return pair(hours, 'h', minutes % 60, 'min');
    return pair(days, 'd', hours % 24, 'h');
  }

  /** A number with three significant digits, at least. */
  function threeDigits(x) {
    if (x >= 100) return Math.round(x).toString();
    if (x >= 10) return x.toFixed(1);
    return x.toFixed(2);
  }

  /** Bytes in binary units: "512 B", "2.40 MiB". */
  function fmtBytes(n) {
    if (n == null || !Number.isFinite(n)) return '–';
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let value = n;
    let unit = 0;
    while (value >= 1024 && unit < units.length - 1) {
      value /= 1024;
      unit += 1;
    }
    return (unit === 0 ? Math.round(value) : threeDigits(value)) + NBSP + units[unit];
  }

  /** A count in short form: "950", "12.3k", "4.56M", "1.20G". */
  function fmtCount(n) {
    if (n == null || !Number.isFinite(n)) return '–';
    const steps = [[1e9, 'G'], [1e6, 'M'], [1e3, 'k']];
    for (const [size, suffix] of steps) {
      if (Math.abs(n) >= size) return threeDigits(n / size) + suffix;
    }
    return n < 10 && n % 1 !== 0 ? n.toFixed(1) : Math.round(n).toString();
  }

  /** Records per second: "12.3k/s". */
  function fmtRate(r) {
    return r == null ? '–' : fmtCount(r) + '/s';
  }

  /** A ratio in 0..1 as "37 %". */
  function fmtPercent(r) {
    return r == null ? '–' : Math.round(r * 100) + NBSP + '%';
  }

  /** A timestamp (ms since the epoch) as the local time of day, "14:03:27". */
  function fmtClock(ts) {
    if (!ts) return '–';
    return new Date(ts).toLocaleTimeString('en-GB', { hour12: false });
  }

  /** How long before `now` the timestamp `ts` was: "3.20 s ago". */
  function fmtAgo(ts, now) {
    if (!ts) return '';
    const ago = Math.max(0, now - ts);
    if (ago < 1000) return 'just now';
    return (ago < 60000 ? Math.round(ago / 1000) + NBSP + 's' : fmtDuration(ago)) + ' ago';
  }

  /** "1 restart", "3 restarts". */
  function plural(n, word) {
    return n + ' ' + word + (n === 1 ? '' : 's');
  }

  /**
   * The watermark of a task at the end of its input, the end of time: i64::MAX in the JSON,
   * which JavaScript reads as 2^63 (the nearest double), so compare with >=.
   */
  const END_OF_TIME = 9223372036854775807;
  /**
   * Timestamps (ms since the epoch) from 2000 up to 2100 read as wall-clock times; others (a
   * record's index, as the generator's) are only numbers. The same range as `weir status`.
   */
  const WALL_CLOCK_MS = [946684800000, 4102444800000];

  /** Whether the watermark `w` is a wall-clock time, not the end of time nor a mere number. */
  function isWallClock(w) {
    return w != null && w >= WALL_CLOCK_MS[0] && w < WALL_CLOCK_MS[1];
  }

  /** A watermark: "14:03:27" (local time of day), "end of input", the number, or "–" when none. */
  function fmtWatermark(w) {
    if (w == null) return '–';
    if (w >= END_OF_TIME) return 'end of input';
    return isWallClock(w) ? fmtClock(w) : String(w);
  }

  /** A watermark for a tooltip: the UTC time too when it is one. */
  function fmtWatermarkLong(w) {
    return isWallClock(w) ? w + ' (' + new Date(w).toISOString() + ')' : fmtWatermark(w);
  }

  /** The lag of a vertex or task behind the clock, only beside a wall-clock watermark. */
  function fmtLag(figures) {
    if (!isWallClock(figures.watermark) || figures.watermark_lag == null) return '–';
    const lag = figures.watermark_lag;
    return lag < 0 ? '−' + fmtDuration(-lag) : fmtDuration(lag);
  }

  /** The late, unwired and timer counts that are not 0: "12 late · 340 timers", or ''. */
  function fmtEventCounts(figures) {
    return [[figures.records_late, 'late'], [figures.records_unwired, 'unwired'], [figures.pending_timers, 'timers']]
      .filter(([n]) => n > 0)
      .map(([n, label]) => fmtCount(n) + NBSP + label)
      .join(' · ');
  }

  /** Whether a vertex has anything of event time to show: a watermark or a count not 0. */
  function hasEventTime(v) {
    return v.watermark != null || v.records_late > 0 || v.records_unwired > 0 || v.pending_timers > 0;
  }

  // ---------------------------------------------------------------------------
  // DOM helpers

  /** Sets attributes (`on…` keys add listeners); null and false are skipped. */
  function setAttributes(el, attrs) {
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value == null || value === false) continue;
      if (key.startsWith('on')) el.addEventListener(key.slice(2), value);
      else el.setAttribute(key, value === true ? '' : String(value));
    }
  }

  /** Appends children: nodes as they are, anything else as text. */
  function appendChildren(el, children) {
    for (const child of children.flat(Infinity)) {
      if (child == null || child === false) continue;
      el.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
    }
  }

  /** An HTML element. */
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    setAttributes(el, attrs);
    appendChildren(el, children);
    return el;
  }

  /** An SVG element. */
  function svg(tag, attrs, ...children) {
    const el = document.createElementNS(SVG_NS, tag);
    setAttributes(el, attrs);
    appendChildren(el, children);
    return el;
  }

  /** Replaces the children of the element with id `id`. */
  function fill(id, ...children) {
    const el = document.getElementById(id);
    el.replaceChildren();
    appendChildren(el, children);
    return el;
  }

  /** Sets the text of the element with id `id`. */
  function setText(id, text) {
    document.getElementById(id).textContent = text;
  }

  // ---------------------------------------------------------------------------
  // Header

  /** Job name, status, uptime, restarts and directory. */
  function renderHeader(job) {
    setText('job-name', job.name || '(unnamed job)');
    const pill = document.getElementById('job-status');
    const unreachable = state.stopped === 'unreachable';
    pill.textContent = unreachable ? 'UNREACHABLE' : job.status || '–';
    pill.dataset.status = job.status || 'UNKNOWN';
    pill.dataset.tone = unreachable ? 'bad' : STATUS_TONE[job.status] || 'warn';
    pill.title = unreachable ? 'last reported status: ' + job.status : '';
    setText('job-uptime', fmtDuration(job.duration));
    setText('job-restarts', String(job.restarts ?? '–'));
    setText('job-directory', job.checkpoint_directory || '–');
    document.getElementById('job-directory').title = job.checkpoint_directory || '';
    document.title = 'Weir · ' + (job.name || 'job') + ' · ' + (job.status || '');
  }

  /** The small "updated …" line of the graph card. */
  function renderConnection() {
    const el = document.getElementById('connection');
    if (state.stopped === 'unreachable') {
      el.textContent = 'endpoint unreachable';
      el.dataset.tone = 'bad';
    } else if (state.stopped === 'ended') {
      el.textContent = 'job ended · updates stopped';
      el.dataset.tone = '';
    } else if (state.failures > 0) {
      el.textContent = 'no answer (' + state.failures + '), retrying…';
      el.dataset.tone = 'bad';
    } else if (state.lastAnswer) {
      el.textContent = 'live · updated ' + fmtClock(state.lastAnswer);
      el.dataset.tone = '';
    }
  }

  // ---------------------------------------------------------------------------
  // Job graph

  /**
   * Box size and spacing of the graph, in SVG units (= CSS pixels). `eventTime` is the height
   * the two event-time lines add to every box of a job where a vertex has a watermark.
   */
  const BOX = { w: 224, h: 126, eventTime: 32, colGap: 84, rowGap: 20, pad: 14 };

  /**
   * Each vertex's depth: 0 for vertices without inputs, else one more than
   * its deepest input. Cycles (which a job graph never has) cannot loop here:
   * depths are capped at the number of vertices.
   */
  function vertexDepths(vertices, edges) {
    const depth = new Map(vertices.map((v) => [v.name, 0]));
    for (let round = 0; round < vertices.length; round += 1) {
      let changed = false;
      for (const e of edges) {
        if (!depth.has(e.from) || !depth.has(e.to)) continue;
        const d = Math.min(depth.get(e.from) + 1, vertices.length);
        if (d > depth.get(e.to)) {
          depth.set(e.to, d);
          changed = true;
        }
      }
      if (!changed) break;
    }
    return depth;
  }

  /** Each vertex's box position, boxes `boxH` high: columns by depth, stacked in job-file order. */
  function layoutGraph(vertices, edges, boxH) {
    const depth = vertexDepths(vertices, edges);
    const columns = [];
    for (const v of vertices) {
      const d = depth.get(v.name);
      (columns[d] = columns[d] || []).push(v);
    }
    const tallest = Math.max(...columns.map((c) => (c ? c.length : 0)));
    const height = BOX.pad * 2 + tallest * boxH + (tallest - 1) * BOX.rowGap;
    const positions = new Map();
    columns.forEach((column, d) => {
      if (!column) return;
      const columnHeight = column.length * boxH + (column.length - 1) * BOX.rowGap;
      const top = (height - columnHeight) / 2;
      column.forEach((v, i) => {
        positions.set(v.name, {
          x: BOX.pad + d * (BOX.w + BOX.colGap),
          y: top + i * (boxH + BOX.rowGap),
        });
      });
    });
    const width = BOX.pad * 2 + columns.length * BOX.w + (columns.length - 1) * BOX.colGap;
    return { positions, width, height };
  }

  /** How strongly a vertex is back-pressured: '', 'some' or 'high'. */
  function pressureLevel(ratio) {
    if (ratio >= 0.5) return 'high';
    if (ratio >= 0.1) return 'some';
    return '';
  }

  /** A labelled horizontal bar for a ratio in 0..1. */
  function ratioBar(label, ratio, y, barClass) {
    const x = 100;
    const width = BOX.w - x - 50;
    const value = Math.max(0, Math.min(1, ratio || 0));
    return svg('g', {},
      svg('text', { class: 'bar-label', x: 14, y: y + 8 }, label),
      svg('rect', { class: 'bar-track', x, y, width, height: 9, rx: 2 }),
      svg('rect', { class: 'bar ' + barClass, x, y, width: Math.max(value * width, value > 0 ? 1.5 : 0), height: 9, rx: 2 }),
      svg('text', { class: 'bar-value', x: BOX.w - 12, y: y + 8, 'text-anchor': 'end' }, fmtPercent(value)));
  }

  /** The tooltip of a vertex: its figures per subtask (event time's in a job that has it). */
  function vertexTooltip(v, eventTime) {
    const lines = [v.name + ' (' + v.kind + ', parallelism ' + v.parallelism + ')'];
    if (eventTime) {
      lines.push('watermark ' + fmtWatermarkLong(v.watermark) + (v.parallelism > 1 ? ' (its slowest subtask\'s)' : ''));
    }
    for (const t of v.tasks || []) {
      let line = '#' + t.subtask + ': in ' + fmtRate(t.rate_in) + ', out ' + fmtRate(t.rate_out) +
        ', busy ' + fmtPercent(t.busy_ratio) + ', back-pressured ' + fmtPercent(t.backpressured_ratio);
      if (eventTime) {
        const counts = fmtEventCounts(t);
        line += ', watermark ' + fmtWatermark(t.watermark) + ', lag ' + fmtLag(t) + (counts ? ', ' + counts : '');
      }
      lines.push(line);
    }
    return lines.join('\n');
  }

  /**
   * One vertex: a box `boxH` high with its name, kind, parallelism, rates, in a job with event
   * time its watermark, lag and the late, unwired and timer counts that are not 0, and two bars.
   */
  function vertexBox(v, pos, boxH, eventTime) {
    const rateText = v.kind === 'source' ? 'out ' + fmtRate(v.rate_out)
      : v.kind === 'sink' ? 'in ' + fmtRate(v.rate_in)
        : 'in ' + fmtRate(v.rate_in) + ' · out ' + fmtRate(v.rate_out);
    const totalText = v.kind === 'source' ? fmtCount(v.records_out) + ' records out'
      : v.kind === 'sink' ? fmtCount(v.records_in) + ' records in'
        : fmtCount(v.records_in) + ' in · ' + fmtCount(v.records_out) + ' out';
    const parallelism = '×' + v.parallelism;
    const badgeWidth = 14 + parallelism.length * 7;
    const pressure = pressureLevel(v.backpressured_ratio);
    const bars = 92 + (eventTime ? BOX.eventTime : 0);
    return svg('g', {
      class: 'vertex',
      'data-vertex': v.name,
      'data-kind': v.kind,
      'data-pressure': pressure,
      transform: 'translate(' + pos.x + ',' + pos.y + ')',
    },
    svg('title', {}, vertexTooltip(v, eventTime)),
    svg('rect', { class: 'box', width: BOX.w, height: boxH, rx: 7 }),
    svg('rect', { class: 'stripe ' + v.kind, x: 0.6, y: 6, width: 3.5, height: boxH - 12, rx: 1.5 }),
    svg('text', { class: 'name', x: 14, y: 23 }, v.name),
    svg('rect', { class: 'parallelism-bg', x: BOX.w - 12 - badgeWidth, y: 10, width: badgeWidth, height: 18, rx: 9 }),
    svg('text', { class: 'parallelism', x: BOX.w - 12 - badgeWidth / 2, y: 23, 'text-anchor': 'middle' }, parallelism),
    svg('text', { class: 'kind', x: 14, y: 40 }, v.kind),
    svg('text', { class: 'rates', x: 14, y: 62 }, rateText),
    svg('text', { class: 'totals', x: 14, y: 78 }, totalText),
    eventTime && svg('text', { class: 'watermark', x: 14, y: 96, 'data-watermark': v.watermark == null ? null : String(v.watermark) },
      'watermark ' + fmtWatermark(v.watermark) + (isWallClock(v.watermark) ? ' · lag ' + fmtLag(v) : '')),
    eventTime && svg('text', { class: 'event-counts', x: 14, y: 112 }, fmtEventCounts(v)),
    ratioBar('busy', v.busy_ratio, bars, 'busy'),
    ratioBar('back-pressure', v.backpressured_ratio, bars + 16, 'pressure' + (pressure === 'high' ? ' high' : '')));
  }

  /** One edge: a curve from the right of `from` to the left of `to` (boxes `boxH` high), labelled. */
  function edgeCurve(e, from, to, boxH) {
    const x1 = from.x + BOX.w;
    const y1 = from.y + boxH / 2;
    const x2 = to.x - 3;
    const y2 = to.y + boxH / 2;
    const mid = (x1 + x2) / 2;
    const label = e.partitioning || '';
    const labelWidth = 12 + label.length * 6.2;
    const labelY = (y1 + y2) / 2;
    return svg('g', { class: 'edge', 'data-from': e.from, 'data-to': e.to },
      svg('path', {
        d: 'M' + x1 + ',' + y1 + ' C' + mid + ',' + y1 + ' ' + mid + ',' + y2 + ' ' + x2 + ',' + y2,
        'marker-end': 'url(#arrow)',
      }),
      label && svg('rect', { class: 'label-bg', x: mid - labelWidth / 2, y: labelY - 9, width: labelWidth, height: 18, rx: 9 }),
      label && svg('text', { class: 'label', x: mid, y: labelY + 4, 'text-anchor': 'middle' }, label));
  }

  /** The job graph as an SVG drawing. */
  function renderGraph(job) {
    const vertices = job.vertices || [];
    if (vertices.length === 0) {
      fill('graph', h('div', { class: 'empty' }, 'The job has no vertices to show.'));
      return;
    }
    const edges = job.edges || [];
    const eventTime = vertices.some(hasEventTime);
    const boxH = BOX.h + (eventTime ? BOX.eventTime : 0);
    const layout = layoutGraph(vertices, edges, boxH);
    const drawing = svg('svg', {
      width: layout.width,
      height: layout.height,
      viewBox: '0 0 ' + layout.width + ' ' + layout.height,
      role: 'img',
      'aria-label': 'job graph of ' + job.name,
    },
    svg('defs', {},
      svg('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto' },
        svg('path', { class: 'arrowhead', d: 'M0,0 L10,5 L0,10 z' }))),
    edges.filter((e) => layout.positions.has(e.from) && layout.positions.has(e.to))
      .map((e) => edgeCurve(e, layout.positions.get(e.from), layout.positions.get(e.to), boxH)),
    vertices.map((v) => vertexBox(v, layout.positions.get(v.name), boxH, eventTime)));
    fill('graph', drawing);
  }

  // ---------------------------------------------------------------------------
  // Checkpoint overview

  /** The four counts. */
  function renderCounts(counts) {
    const tile = (cls, label, value) => h('div', { class: 'count ' + cls + (value > 0 ? ' nonzero' : '') },
      h('div', { class: 'value' }, String(value ?? 0)),
      h('div', { class: 'label' }, label));
    fill('counts',
      tile('completed', 'Completed', counts.completed),
      tile('failed', 'Failed', counts.failed),
      tile('in-progress', 'In progress', counts.in_progress),
      tile('total', 'Triggered', counts.total));
  }

  /** A link that opens a checkpoint's details in the history table. */
  function checkpointLink(id) {
    return h('a', { onclick: () => openCheckpoint(id, true), title: 'show its details' }, '#' + id);
  }

  /** One line of the "latest" list: id, when, how long, how big. */
  function latestLine(cp, now) {
    return [checkpointLink(cp.id), ' · ', fmtClock(cp.trigger_timestamp),
      ' (' + fmtAgo(cp.trigger_timestamp, now) + ')',
      h('div', { class: 'figures' }, fmtDuration(cp.end_to_end_duration) + ' · ' + fmtBytes(cp.state_size))];
  }

  /** Latest completed checkpoint, savepoint, failure and the restore the job started from. */
  function renderLatest(latest, now) {
    const none = (text) => h('span', { class: 'none' }, text);
    const items = [];
    items.push(h('dt', {}, 'Latest completed'),
      h('dd', {}, latest.completed ? latestLine(latest.completed, now) : none('none yet')));
    items.push(h('dt', {}, 'Latest savepoint'),
      h('dd', {}, latest.savepoint
        ? [latestLine(latest.savepoint, now),
          latest.savepoint.external_path ? h('div', { class: 'path' }, latest.savepoint.external_path) : null]
        : none('none')));
    items.push(h('dt', {}, 'Latest failure'),
      h('dd', {}, latest.failed
        ? [checkpointLink(latest.failed.id), ' · ', fmtClock(latest.failed.failure_timestamp || latest.failed.trigger_timestamp),
          h('div', { class: 'failed-text' }, latest.failed.failure_message || 'failed')]
        : none('none')));
    const restored = latest.restored;
    items.push(h('dt', {}, 'Restored from'),
      h('dd', {}, restored
        ? [(restored.is_savepoint ? 'savepoint ' : 'checkpoint ') + restored.id + ' at ' + fmtClock(restored.restore_timestamp),
          restored.path ? h('div', { class: 'path' }, restored.path) : null,
          restored.rescaled && restored.rescaled.length
            ? h('div', {}, 'rescaled: ' + restored.rescaled.map((c) => c.vertex + ' ' + c.from + ' → ' + c.to).join(', '))
            : null]
        : none('nothing: the job started empty')));
    fill('latest', h('dl', { class: 'latest' }, items));
  }

  /** Minimum, average and maximum of duration, size and alignment ('–' before any completed). */
  function renderSummary(summary, completed) {
    const row = (label, m, format) => h('tr', {},
      h('td', {}, label), h('td', {}, format(m.min)), h('td', {}, format(m.avg)), h('td', {}, format(m.max)));
    const empty = { min: null, avg: null, max: null };
    if (!completed) summary = {};
    fill('summary', h('table', {},
      h('thead', {}, h('tr', {}, h('th', {}, 'Completed'), h('th', {}, 'min'), h('th', {}, 'avg'), h('th', {}, 'max'))),
      h('tbody', {},
        row('End to end', summary.end_to_end_duration || empty, fmtDuration),
        row('State size', summary.state_size || empty, fmtBytes),
        row('Alignment', summary.alignment_duration || empty, fmtDuration))));
  }

  /** Keys of the configuration whose numbers are durations in milliseconds. */
  const DURATION_KEYS = /interval|timeout|pause|duration|_ms$/;

  /** The checkpoint configuration as short "key value" pairs. */
  function renderConfig(config) {
    if (!config || typeof config !== 'object') return;
    const pairs = Object.entries(config).map(([key, value]) => {
      let text;
      if (value == null) text = 'off';
      else if (typeof value === 'number' && DURATION_KEYS.test(key)) text = fmtDuration(value);
      else if (typeof value === 'object') text = JSON.stringify(value);
      else text = String(value);
      return h('span', {}, key.replace(/_/g, ' ') + ' ', h('b', {}, text));
    });
    fill('config', pairs);
  }

  // ---------------------------------------------------------------------------
  // History chart

  /** A round number at least `x`: 1, 2 or 5 times a power of ten. */
  function niceCeil(x) {
    if (!(x > 0)) return 1;
    const power = Math.pow(10, Math.floor(Math.log10(x)));
    for (const step of [1, 2, 5, 10]) {
      if (step * power >= x) return step * power;
    }
    return 10 * power;
  }

  /** A round number of bytes at least `x`: 1, 2 or 5 times a power of ten of KiB, MiB… */
  function niceBytes(x) {
    let scale = 1;
    while (x / scale >= 1024) scale *= 1024;
    return niceCeil(x / scale) * scale;
  }

  /** The class of a checkpoint's marks: completed, savepoint, failed or in-progress. */
  function pointClass(cp) {
    if (cp.status === 'FAILED') return 'failed';
    if (cp.status === 'IN_PROGRESS') return 'in-progress';
    return cp.is_savepoint ? 'savepoint' : 'completed';
  }

  /** The tooltip of a checkpoint's mark. */
  function pointTitle(cp) {
    return '#' + cp.id + (cp.is_savepoint ? ' savepoint' : ' checkpoint') + ' · ' +
      cp.status.toLowerCase().replace('_', ' ') + ' · ' + fmtClock(cp.trigger_timestamp) + '\n' +
      fmtDuration(cp.end_to_end_duration) + ' · ' + fmtBytes(cp.state_size) +
      (cp.failure_message ? '\n' + cp.failure_message : '');
  }

  /** A point's mark: a diamond for savepoints, a circle otherwise. */
  function pointMark(cp, x, y, series) {
    const cls = 'point ' + pointClass(cp) + ' ' + series;
    const attrs = { class: cls, 'data-checkpoint': cp.id, onclick: () => openCheckpoint(cp.id, true) };
    const mark = cp.is_savepoint
      ? svg('path', Object.assign(attrs, { d: 'M' + x + ',' + (y - 5) + ' l5,5 l-5,5 l-5,-5 z' }))
      : svg('circle', Object.assign(attrs, { cx: x, cy: y, r: cp.status === 'FAILED' ? 4 : 3.2 }));
    mark.appendChild(svg('title', {}, pointTitle(cp)));
    return mark;
  }

  /**
   * One panel of the chart: a measure of each checkpoint over trigger time.
   * Completed checkpoints are joined by a line; failures are red; savepoints
   * are diamonds; the checkpoint in progress is a hollow circle.
   */
  function chartPanel(points, x, box, series, title, value, format, nice) {
    const max = nice(Math.max(...points.map(value), 0));
    const y = (v) => box.top + box.height - (v / max) * box.height;
    const parts = [svg('text', { class: 'panel-title', x: box.left, y: box.top - 6 }, title)];
    for (const fraction of [0, 0.5, 1]) {
      const gy = box.top + box.height - fraction * box.height;
      parts.push(svg('line', { class: fraction === 0 ? 'axis' : 'grid', x1: box.left, x2: box.left + box.width, y1: gy, y2: gy }));
      parts.push(svg('text', { class: 'tick', x: box.left - 6, y: gy + 3.5, 'text-anchor': 'end' }, format(max * fraction)));
    }
    const done = points.filter((cp) => cp.status === 'COMPLETED');
    if (done.length > 1) {
      const line = done.map((cp, i) => (i ? 'L' : 'M') + x(cp.trigger_timestamp) + ',' + y(value(cp))).join(' ');
      const baseline = box.top + box.height;
      const area = line + ' L' + x(done[done.length - 1].trigger_timestamp) + ',' + baseline +
        ' L' + x(done[0].trigger_timestamp) + ',' + baseline + ' z';
      parts.push(svg('path', { class: 'area ' + series, d: area }));
      parts.push(svg('path', { class: 'series ' + series, d: line }));
    }
    for (const cp of points) {
      if (cp.status === 'FAILED') {
        const fx = x(cp.trigger_timestamp);
        parts.push(svg('line', { class: 'failure-mark', x1: fx, x2: fx, y1: box.top, y2: box.top + box.height }));
      }
    }
    for (const cp of points) parts.push(pointMark(cp, x(cp.trigger_timestamp), y(value(cp)), series));
    return svg('g', { class: 'panel ' + series }, parts);
  }

  /** Time labels along the bottom axis. */
  function timeTicks(x, t0, t1, box) {
    const count = Math.max(2, Math.floor(box.width / 140));
    const ticks = [];
    for (let i = 0; i <= count; i += 1) {
      const t = t0 + ((t1 - t0) * i) / count;
      const anchor = i === 0 ? 'start' : i === count ? 'end' : 'middle';
      ticks.push(svg('text', { class: 'tick', x: x(t), y: box.top + box.height + 15, 'text-anchor': anchor }, fmtClock(t)));
    }
    return ticks;
  }

  /** The history chart: end-to-end duration above, state size below, over trigger time. */
  function renderChart(history) {
    const container = document.getElementById('chart');
    if (!history || history.length === 0) {
      fill('chart', h('div', { class: 'empty' }, 'No checkpoint yet.'));
      return;
    }
    const points = history.slice().reverse(); // oldest first
    const width = Math.max(320, container.clientWidth);
    const left = 64;
    const right = 12;
    const panelHeight = 92;
    const top = { duration: 18, size: 18 + panelHeight + 34 };
    const height = top.size + panelHeight + 24;
    let t0 = points[0].trigger_timestamp;
    let t1 = points[points.length - 1].trigger_timestamp;
    if (t1 - t0 < 1000) {
      t0 -= 500;
      t1 += 500;
    }
    const innerWidth = width - left - right;
    const pad = 8;
    const x = (t) => left + pad + ((t - t0) / (t1 - t0)) * (innerWidth - 2 * pad);
    const box = (y) => ({ left, top: y, width: innerWidth, height: panelHeight });
    const drawing = svg('svg', { width, height, viewBox: '0 0 ' + width + ' ' + height, role: 'img', 'aria-label': 'checkpoint history chart' },
      chartPanel(points, x, box(top.duration), 'duration', 'END-TO-END DURATION', (cp) => cp.end_to_end_duration || 0, fmtDuration, niceCeil),
      chartPanel(points, x, box(top.size), 'size', 'STATE SIZE', (cp) => cp.state_size || 0, fmtBytes, niceBytes),
      timeTicks(x, t0, t1, box(top.size)));
    fill('chart', drawing);
  }

  // ---------------------------------------------------------------------------
  // History table

  /** What the note column says about a checkpoint: why it failed, or where a savepoint is. */
  function checkpointNote(cp) {
    if (cp.failure_message) return cp.failure_message;
    if (cp.is_savepoint && cp.external_path) return cp.external_path;
    if (cp.is_final) return 'final checkpoint';
    return '';
  }

  /** One row of the history table. */
  function historyRow(cp, now) {
    const expanded = state.expanded.has(cp.id);
    const kind = cp.is_savepoint ? 'savepoint' : 'checkpoint';
    return h('tr', {
      class: 'checkpoint-row' + (expanded ? ' expanded' : ''),
      'data-checkpoint-id': cp.id,
      'data-status': cp.status,
      'aria-expanded': expanded ? 'true' : 'false',
    },
    h('td', { class: 'num id' }, String(cp.id)),
    h('td', {}, h('span', { class: 'status-dot ' + cp.status }, cp.status.toLowerCase().replace('_', ' '))),
    h('td', {}, h('span', { class: 'kind-tag ' + kind }, kind + (cp.is_final ? ' (final)' : ''))),
    h('td', { title: fmtAgo(cp.trigger_timestamp, now) }, fmtClock(cp.trigger_timestamp)),
    h('td', { class: 'num' }, fmtDuration(cp.end_to_end_duration)),
    h('td', { class: 'num' }, cp.status === 'COMPLETED' || cp.state_size ? fmtBytes(cp.state_size) : '–'),
    h('td', { class: 'num' }, fmtDuration(cp.alignment_duration)),
    h('td', { class: 'num' }, cp.num_acknowledged_subtasks + ' / ' + cp.num_subtasks),
    h('td', { class: 'note' }, checkpointNote(cp)));
  }

  // ---------------------------------------------------------------------------
  // Kafka

  /** An offset, or a dash while it is not known. */
  function fmtOffset(n) {
    return n == null ? '–' : String(n);
  }

  /** Fractional milliseconds: "0.42 ms" below 10 ms, else as fmtDuration. */
  function fmtFineDuration(ms) {
    if (ms == null || !Number.isFinite(ms)) return '–';
    return ms < 10 ? ms.toFixed(2) + NBSP + 'ms' : fmtDuration(ms);
  }

  /** One Kafka source: a row per partition, the most lag first. */
  function kafkaSourceTable(v) {
    const rows = [];
    for (const t of v.tasks || []) {
      for (const p of (t.kafka_source && t.kafka_source.partitions) || []) rows.push({ subtask: t.subtask, p });
    }
    rows.sort((a, b) => (b.p.lag || 0) - (a.p.lag || 0) ||
      a.p.topic.localeCompare(b.p.topic) || a.p.partition - b.p.partition);
    const lag = rows.reduce((sum, r) => sum + (r.p.lag || 0), 0);
    const head = ['Topic', 'Partition', 'Subtask', 'Offset', 'High watermark', 'Lag'];
    return h('div', { class: 'kafka-vertex', 'data-kafka-source': v.name },
      h('h3', {}, 'Source ' + v.name + ' · lag ' + fmtCount(lag) + ' · ' + plural(rows.length, 'partition')),
      h('table', { class: 'tasks kafka-partitions' },
        h('thead', {}, h('tr', {}, head.map((title) => h('th', {}, title)))),
        h('tbody', {}, rows.map((r) => h('tr', { 'data-partition': r.p.topic + '/' + r.p.partition },
          h('td', {}, r.p.topic),
          h('td', { class: 'num' }, r.p.partition),
          h('td', { class: 'num' }, r.subtask),
          h('td', { class: 'num' }, fmtOffset(r.p.offset)),
          h('td', { class: 'num' }, fmtOffset(r.p.high_watermark)),
          h('td', { class: 'num' }, fmtOffset(r.p.lag)))))));
  }

  /** One exactly-once Kafka sink: a row per subtask. */
  function kafkaSinkTable(v) {
    const head = ['Subtask', 'Transactions', 'Records', 'Sent again', 'Commit p50', 'Commit p99', 'Commit max', 'Last'];
    const tasks = (v.tasks || []).filter((t) => t.kafka_sink);
    return h('div', { class: 'kafka-vertex', 'data-kafka-sink': v.name },
      h('h3', {}, 'Sink ' + v.name),
      h('table', { class: 'tasks kafka-transactions' },
        h('thead', {}, h('tr', {}, head.map((title) => h('th', {}, title)))),
        h('tbody', {}, tasks.map((t) => {
          const s = t.kafka_sink;
          const d = s.commit_duration || {};
          return h('tr', { 'data-task': v.name + '#' + t.subtask },
            h('td', { class: 'num' }, t.subtask),
            h('td', { class: 'num' }, fmtCount(s.transactions_committed)),
            h('td', { class: 'num' }, fmtCount(s.records_committed)),
            h('td', { class: 'num' }, fmtCount(s.transactions_resent)),
            h('td', { class: 'num' }, fmtFineDuration(d.p50)),
            h('td', { class: 'num' }, fmtFineDuration(d.p99)),
            h('td', { class: 'num' }, fmtFineDuration(d.max)),
            h('td', { class: 'num' }, fmtFineDuration(d.last)));
        }))));
  }

  /** The Kafka card: shown only for a job with Kafka sources or exactly-once Kafka sinks. */
  function renderKafka(job) {
    const parts = [];
    for (const v of job.vertices || []) {
      const tasks = v.tasks || [];
      if (tasks.some((t) => t.kafka_source)) parts.push(kafkaSourceTable(v));
      if (tasks.some((t) => t.kafka_sink)) parts.push(kafkaSinkTable(v));
    }
    document.getElementById('kafka-card').hidden = parts.length === 0;
    fill('kafka', parts);
  }

  /** Tasks in the order of the job graph's vertices, then by subtask. */
  function inGraphOrder(tasks) {
    const vertices = ((state.job && state.job.vertices) || []).map((v) => v.name);
    const rank = (t) => {
      const i = vertices.indexOf(t.vertex);
      return i < 0 ? vertices.length : i;
    };
    return tasks.slice().sort((a, b) => rank(a) - rank(b) || a.subtask - b.subtask);
  }

  /** The per-task table of one checkpoint's details. */
  function taskTable(tasks) {
    const head = ['Task', 'Acknowledged', 'End to end', 'Sync', 'Async', 'Alignment', 'State size'];
    return h('table', { class: 'tasks' },
      h('thead', {}, h('tr', {}, head.map((title) => h('th', {}, title)))),
      h('tbody', {}, inGraphOrder(tasks).map((t) => h('tr', { 'data-task': t.vertex + '#' + t.subtask },
        h('td', {}, t.vertex + '#' + t.subtask),
        h('td', {}, fmtClock(t.ack_timestamp)),
        h('td', {}, fmtDuration(t.end_to_end_duration)),
        h('td', {}, fmtDuration(t.sync_duration)),
        h('td', {}, fmtDuration(t.async_duration)),
        h('td', {}, fmtDuration(t.alignment_duration)),
        h('td', {}, fmtBytes(t.state_size))))));
  }

  /** What goes inside an open checkpoint's details row. */
  function detailsContent(id) {
    const entry = state.details.get(id);
    if (!entry || entry.loading) return h('div', { class: 'details-note' }, 'Loading the per-task figures…');
    if (entry.error) return h('div', { class: 'details-note error' }, 'Could not load checkpoint ' + id + ': ' + entry.error);
    const cp = entry.data;
    const tasks = cp.tasks || [];
    const pending = cp.num_subtasks - tasks.length;
    return h('div', {},
      h('div', { class: 'details-note' },
        'Checkpoint ' + cp.id + ': triggered ' + fmtClock(cp.trigger_timestamp) +
        (cp.latest_ack_timestamp ? ', last acknowledgement ' + fmtClock(cp.latest_ack_timestamp) : '') +
        ', ' + tasks.length + ' of ' + cp.num_subtasks + ' tasks acknowledged' +
        (pending > 0 && cp.status !== 'COMPLETED' ? ' (' + pending + ' missing)' : '') +
        (cp.external_path ? ' · ' + cp.external_path : '')),
      tasks.length ? taskTable(tasks) : null);
  }

  /** The row under an open checkpoint's row. */
  function detailsRow(id) {
    return h('tr', { class: 'checkpoint-details', 'data-details-for': id },
      h('td', { colspan: 9 }, detailsContent(id)));
  }

  /** A string that changes whenever the table would look different. */
  function historySignature(history) {
    const rows = history.map((cp) => [cp.id, cp.status, cp.end_to_end_duration, cp.state_size,
      cp.num_acknowledged_subtasks, cp.trigger_timestamp].join(':'));
    return rows.join('|') + '#' + Array.from(state.expanded).join(',');
  }

  /** The history table, newest first, with open details rows. */
  function renderHistory(history, now) {
    const signature = historySignature(history);
    if (signature === state.historySignature) return;
    state.historySignature = signature;
    const rows = [];
    for (const cp of history) {
      rows.push(historyRow(cp, now));
      if (state.expanded.has(cp.id)) rows.push(detailsRow(cp.id));
    }
    if (rows.length === 0) rows.push(h('tr', { class: 'empty' }, h('td', { colspan: 9 }, 'No checkpoint yet.')));
    fill('history-rows', rows);
    scrollToRequestedRow();
  }

  /** Redraws only the details row of checkpoint `id`, if it is shown. */
  function refreshDetailsRow(id) {
    const row = document.querySelector('tr[data-details-for="' + id + '"]');
    if (row) row.replaceWith(detailsRow(id));
  }

  /** Scrolls to the row named by #checkpoint=ID once it exists, unless it is in view. */
  function scrollToRequestedRow() {
    if (state.scrollTo == null) return;
    const row = document.querySelector('tr.checkpoint-row[data-checkpoint-id="' + state.scrollTo + '"]');
    if (!row) return;
    state.scrollTo = null;
    const box = row.getBoundingClientRect();
    if (box.top < 0 || box.bottom > window.innerHeight) row.scrollIntoView({ block: 'start' });
  }

  /** Fetches the details of checkpoint `id` unless what is cached is final. */
  async function loadDetails(id) {
    const cp = (state.checkpoints && state.checkpoints.history || []).find((c) => c.id === id);
    const cached = state.details.get(id);
    const status = cp ? cp.status : null;
    if (cached && !cached.loading && !cached.error && cached.status === status && status !== 'IN_PROGRESS') return;
    if (!cached || cached.error) state.details.set(id, { loading: true });
    refreshDetailsRow(id);
    try {
      const data = await api.checkpoint(id);
      state.details.set(id, { status: data.status, data });
    } catch (err) {
      const message = err.status === 404 ? 'it is no longer in the job\'s history' : err.message;
      state.details.set(id, { status, error: message });
    }
    refreshDetailsRow(id);
  }

  /** Opens (or, from a row click, toggles) checkpoint `id`'s details. */
  function openCheckpoint(id, scroll) {
    if (state.expanded.has(id) && !scroll) {
      state.expanded.delete(id);
      if (window.location.hash === '#checkpoint=' + id) window.history.replaceState(null, '', window.location.pathname + window.location.search);
    } else {
      state.expanded.add(id);
      window.history.replaceState(null, '', '#checkpoint=' + id);
      if (scroll) state.scrollTo = id;
      loadDetails(id);
    }
    redrawHistory();
  }

  /** Redraws the table from the last answer (after a click). */
  function redrawHistory() {
    if (!state.checkpoints) return;
    const now = state.job ? state.job.now : Date.now();
    renderHistory(state.checkpoints.history || [], now);
  }

  /** Row clicks toggle details (one listener for the whole table). */
  function onHistoryClick(event) {
    const row = event.target.closest('tr.checkpoint-row');
    if (!row || window.getSelection().toString()) return;
    openCheckpoint(Number(row.dataset.checkpointId), false);
  }

  // ---------------------------------------------------------------------------
  // Messages

  /** Shows or hides the banner about the job having ended or being unreachable. */
  function renderBanner() {
    const banner = document.getElementById('banner');
    let tone = '';
    let text = null;
    let button = null;
    if (state.stopped === 'ended') {
      const status = state.job ? state.job.status : 'ended';
      text = 'Job ended: ' + status + '. The page stopped polling; what it shows is the last state the job reported.';
      button = h('button', { type: 'button', onclick: () => window.location.reload() }, 'Reload');
    } else if (state.stopped === 'unreachable') {
      tone = 'bad';
      text = 'Endpoint unreachable: no answer since ' +
        (state.lastAnswer ? fmtClock(state.lastAnswer) : 'the page was opened') +
        '. The job has probably ended or its process went away; polling stopped.';
      button = h('button', { type: 'button', onclick: restartPolling }, 'Try again');
    }
    banner.hidden = text == null;
    banner.dataset.tone = tone;
    banner.replaceChildren();
    if (text) appendChildren(banner, [h('span', { class: 'text' }, text), button]);
  }

  /** What each action asks before it runs, and how it reports its result. */
  const ACTIONS = {
    savepoint: {
      confirm: null,
      busy: 'Taking a savepoint…',
      run: () => api.savepoint(),
      done: (r) => 'Savepoint ' + r.id + ' written to ' + r.path,
    },
    stop: {
      confirm: 'Stop the job with a savepoint? It takes a final savepoint and ends when it completes.',
      confirmLabel: 'Stop the job',
      busy: 'Stopping with a savepoint…',
      run: () => api.stop(),
      done: (r) => 'Stopped with savepoint ' + r.id + ' at ' + r.path + ' (restore it with weir run --restore)',
    },
    cancel: {
      confirm: 'Cancel the job? It stops without a savepoint; completed checkpoints are kept or deleted as its on_cancel setting says.',
      confirmLabel: 'Cancel the job',
      busy: 'Canceling…',
      run: () => api.cancel(),
      done: (r) => 'Cancel requested: ' + (r && r.status ? r.status : 'CANCELING'),
    },
  };

  /** Enables the action buttons while the job can take them. */
  function renderActions() {
    const live = state.job && !TERMINAL.has(state.job.status) && !state.stopped;
    for (const button of document.querySelectorAll('#actions button')) {
      button.disabled = !live || state.actionBusy;
    }
  }

  /** Shows the result of an action (tone: '', 'busy' or 'bad'). */
  function showResult(text, tone) {
    const el = document.getElementById('action-result');
    el.hidden = false;
    el.dataset.tone = tone;
    el.replaceChildren(h('span', { class: 'text' }, text),
      tone === 'busy' ? null : h('button', { type: 'button', class: 'close', onclick: () => { el.hidden = true; } }, 'Dismiss'));
  }

  /** Hides the confirm step. */
  function hideConfirm() {
    const el = document.getElementById('confirm');
    el.hidden = true;
    el.replaceChildren();
    state.action = null;
  }

  /** A click on an action button: asks first when the action ends the job. */
  function onActionClick(event) {
    const button = event.target.closest('button[data-action]');
    if (!button || button.disabled) return;
    const name = button.dataset.action;
    const action = ACTIONS[name];
    if (!action.confirm) {
      runAction(name);
      return;
    }
    state.action = name;
    const el = document.getElementById('confirm');
    el.hidden = false;
    el.replaceChildren(
      h('span', { class: 'text' }, action.confirm),
      h('button', { type: 'button', class: 'primary' + (name === 'cancel' ? ' danger' : ''), 'data-confirm': name, onclick: () => runAction(name) }, action.confirmLabel),
      h('button', { type: 'button', onclick: hideConfirm }, 'Keep it running'));
  }

  /** Runs an action and shows what came of it. */
  async function runAction(name) {
    const action = ACTIONS[name];
    hideConfirm();
    state.actionBusy = true;
    renderActions();
    showResult(action.busy, 'busy');
    try {
      const result = await action.run();
      showResult(action.done(result || {}), '');
    } catch (err) {
      showResult(action.busy.replace('…', '') + ' failed: ' + err.message, 'bad');
    } finally {
      state.actionBusy = false;
      renderActions();
      if (!state.stopped) schedulePoll(0);
    }
  }

  // ---------------------------------------------------------------------------
  // Polling

  /** Draws everything from the last answers. */
  function render() {
    const job = state.job;
    if (job) {
      renderHeader(job);
      renderGraph(job);
      renderKafka(job);
    }
    const cps = state.checkpoints;
    if (cps) {
      const now = job ? job.now : Date.now();
      renderCounts(cps.counts || {});
      renderLatest(cps.latest || {}, now);
      renderSummary(cps.summary || {}, cps.counts && cps.counts.completed);
      renderChart(cps.history || []);
      renderHistory(cps.history || [], now);
      for (const id of state.expanded) loadDetails(id);
    }
    renderConfig(state.config);
    renderConnection();
    renderBanner();
    renderActions();
  }

  /** Plans the next poll in `delay` ms, replacing any planned one. */
  function schedulePoll(delay) {
    clearTimeout(state.timer);
    state.timer = setTimeout(poll, delay);
  }

  /** Asks for the job and its checkpoints, then plans the next poll. */
  async function poll() {
    state.timer = null;
    if (state.stopped) return;
    if (document.hidden) {
      schedulePoll(POLL_MS); // a hidden tab asks nothing; it catches up when shown
      return;
    }
    try {
      const [job, checkpoints] = await Promise.all([api.job(), api.checkpoints()]);
      state.job = job;
      state.checkpoints = checkpoints;
      state.failures = 0;
      state.lastAnswer = Date.now();
      if (!state.config) loadConfig();
      if (TERMINAL.has(job.status)) state.stopped = 'ended';
      render();
      if (!state.stopped) schedulePoll(POLL_MS);
    } catch (err) {
      onPollFailure(err);
    }
  }

  /** A failed poll: retries with growing pauses, then stops and says why. */
  function onPollFailure(err) {
    state.failures += 1;
    const unauthorized = err instanceof ApiError && (err.status === 401 || err.status === 403);
    if (unauthorized) {
      state.stopped = 'unreachable';
      showResult('The endpoint refused the page (' + err.status + ': ' + err.message +
        '). Open a new one-time link: `weir dashboard DIR` prints one.', 'bad');
    } else if (state.failures >= GIVE_UP_AFTER) {
      state.stopped = 'unreachable';
    }
    render();
    if (!state.stopped) schedulePoll(Math.min(POLL_MS * Math.pow(2, state.failures), MAX_BACKOFF_MS));
  }

  /** "Try again" after polling gave up. */
  function restartPolling() {
    state.stopped = null;
    state.failures = 0;
    render();
    schedulePoll(0);
  }

  /** Loads the checkpoint configuration (once; it does not change while the job runs). */
  async function loadConfig() {
    try {
      state.config = await api.config();
      renderConfig(state.config);
    } catch (_) {
      // Shown on the next successful poll's retry; the rest of the page does not need it.
    }
  }

  /** The checkpoint id named by #checkpoint=ID, if any. */
  function checkpointFromHash() {
    const match = /^#checkpoint=(\d+)$/.exec(window.location.hash);
    return match ? Number(match[1]) : null;
  }

  /** Wires the page up and starts polling. */
  function start() {
    document.getElementById('history-rows').addEventListener('click', onHistoryClick);
    document.getElementById('actions').addEventListener('click', onActionClick);
    const requested = checkpointFromHash();
    if (requested != null) {
      state.expanded.add(requested);
      state.scrollTo = requested;
    }
    let resizeTimer = null;
    window.addEventListener('resize', () => {
      clearTimeout(resizeTimer);
      resizeTimer = setTimeout(() => state.checkpoints && renderChart(state.checkpoints.history || []), 150);
    });
    document.addEventListener('visibilitychange', () => {
      if (!document.hidden && !state.stopped) schedulePoll(0);
    });
    renderActions();
    poll();
  }

  start();
}());
