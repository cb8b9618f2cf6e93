// sync-server admin dashboard: polls the admin API (same origin, the browser's own credentials) and renders it.
// No library, no external request. Every API string goes into the DOM through textContent / attributes only.
(function () {
  'use strict';

  const POLL_MS = 1000;          // at most one poll a second
  const RETRY_MAX_MS = 5000;     // back-off ceiling while the server is unreachable
  const AUTH_RETRY_MS = 5000;    // slower polling while the credential is refused
  const REQUEST_TIMEOUT_MS = 15000;  // a request left unanswered this long is given up
  const SLOW_MS = 3000;              // past this, the page says it is still waiting
  const SCOPES_LIMIT = 50;
  const REPLICAS_LIMIT = 100;
  const SERIES_WINDOW = 300;     // seconds shown by the charts
  const SORT_KEYS = ['scope', 'head', 'lag', 'replicas', 'compactedAt'];

  const $ = (id) => document.getElementById(id);
  const nf = new Intl.NumberFormat(undefined, { maximumFractionDigits: 0 });
  const nf1 = new Intl.NumberFormat(undefined, { maximumFractionDigits: 1, minimumFractionDigits: 1 });
  const nf2 = new Intl.NumberFormat(undefined, { maximumFractionDigits: 2 });

  const state = {
    search: '',
    sort: 'scope',
    order: 'asc',
    offset: 0,
    scopesVersion: 0,       // bumped whenever the scope query changes; stale answers are dropped
    selected: null,         // selected scope name
    replicasOffset: 0,
    replicasVersion: 0,
    inFlight: false,
    pending: false,         // a refresh was asked for while a request was in flight
    timer: null,
    failures: 0,
    requestStarted: 0,
    clockSkewMs: 0,         // server clock minus browser clock, from the last status
    lastSeries: [],
    startedSec: null,
    goodSort: { sort: 'scope', order: 'asc' },   // the last sort the server answered
    routeSamples: [],       // [{at, counts: Map}] of the last seconds, for req/s when the API gives none
  };

  // ---------------------------------------------------------------- formatting

  function isNum(v) { return typeof v === 'number' && isFinite(v); }
  function fmtInt(v) { return isNum(v) ? nf.format(v) : '–'; }
  function fmtRate(v) {
    if (!isNum(v)) return '–';
    if (v === 0) return '0';
    if (v < 10) return nf2.format(v);
    if (v < 100) return nf1.format(v);
    return nf.format(v);
  }
  function fmtMs(v) {
    if (!isNum(v)) return '–';
    if (v < 10) return nf2.format(v);
    if (v < 100) return nf1.format(v);
    return nf.format(v);
  }
  function fmtBytes(v) {
    if (!isNum(v)) return '–';
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    let x = v;
    while (x >= 1024 && i < units.length - 1) { x /= 1024; i++; }
    return (i === 0 ? nf.format(x) : (x < 10 ? nf1.format(x) : nf.format(x))) + ' ' + units[i];
  }
  function fmtDuration(seconds) {
    if (!isNum(seconds)) return '–';
    let s = Math.max(0, Math.floor(seconds));
    const d = Math.floor(s / 86400); s -= d * 86400;
    const h = Math.floor(s / 3600); s -= h * 3600;
    const m = Math.floor(s / 60); s -= m * 60;
    if (d > 0) return d + ' d ' + h + ' h';
    if (h > 0) return h + ' h ' + m + ' min';
    if (m > 0) return m + ' min ' + s + ' s';
    return s + ' s';
  }
  function fmtAgo(seconds) {
    if (!isNum(seconds)) return '–';
    const s = Math.max(0, seconds);
    if (s < 1) return 'just now';
    if (s < 90) return Math.round(s) + ' s ago';
    if (s < 5400) return Math.round(s / 60) + ' min ago';
    if (s < 172800) return Math.round(s / 3600) + ' h ago';
    return Math.round(s / 86400) + ' d ago';
  }
  function pad2(n) { return (n < 10 ? '0' : '') + n; }
  function fmtClock(date) { return pad2(date.getHours()) + ':' + pad2(date.getMinutes()) + ':' + pad2(date.getSeconds()); }
  function fmtDateTime(date) {
    return date.getFullYear() + '-' + pad2(date.getMonth() + 1) + '-' + pad2(date.getDate()) + ' ' + fmtClock(date);
  }
  function secondsSince(iso) {
    const t = Date.parse(iso);
    if (!isFinite(t)) return null;
    return (Date.now() + state.clockSkewMs - t) / 1000;
  }

  // ---------------------------------------------------------------- DOM helpers (no innerHTML anywhere)

  function setText(el, text) {
    text = String(text);
    if (el.textContent !== text) el.textContent = text;
  }
  function setAttr(el, name, value) {
    if (value === null || value === undefined) {
      if (el.hasAttribute(name)) el.removeAttribute(name);
    } else if (el.getAttribute(name) !== String(value)) {
      el.setAttribute(name, String(value));
    }
  }
  function setClass(el, name, on) {
    if (el.classList.contains(name) !== !!on) el.classList.toggle(name, !!on);
  }
  function el(tag, props, children) {
    const node = document.createElement(tag);
    if (props) {
      for (const k of Object.keys(props)) {
        if (k === 'className') node.className = props[k];
        else if (k === 'text') node.textContent = props[k];
        else node.setAttribute(k, props[k]);
      }
    }
    if (children) for (const c of children) node.appendChild(c);
    return node;
  }
  /** A data cell: shown text, plus the raw value in data-value (omitted when null). */
  function setCell(td, text, raw, title) {
    setText(td, text);
    setAttr(td, 'data-value', raw === null || raw === undefined ? null : raw);
    setAttr(td, 'title', title || null);
  }
  /** Keyed reconcile of a tbody: rows are reused by key so focus, hover and selection survive a refresh. */
  function reconcile(tbody, items, keyOf, keyAttr, create, update) {
    const existing = new Map();
    for (const tr of Array.from(tbody.children)) existing.set(tr.getAttribute(keyAttr), tr);
    const keep = new Set();
    items.forEach((item, i) => {
      const key = String(keyOf(item));
      let tr = existing.get(key);
      if (!tr || keep.has(key)) {
        tr = create(item);
        tr.setAttribute(keyAttr, key);
      }
      keep.add(key);
      update(tr, item);
      if (tbody.children[i] !== tr) tbody.insertBefore(tr, tbody.children[i] || null);
    });
    for (const [key, tr] of existing) if (!keep.has(key) && tr.parentNode === tbody) tbody.removeChild(tr);
    while (tbody.children.length > items.length) tbody.removeChild(tbody.lastChild);
  }
  function cells(tr) {
    const map = {};
    for (const td of tr.children) { const f = td.getAttribute('data-field'); if (f) map[f] = td; }
    return map;
  }

  // ---------------------------------------------------------------- API

  class ApiError extends Error {
    constructor(kind, status, code, message) {
      super(message);
      this.kind = kind;     // 'network' | 'timeout' | 'http' | 'parse'
      this.status = status;
      this.code = code;
    }
  }

  async function getJSON(path) {
    const controller = typeof AbortController === 'function' ? new AbortController() : null;
    const timer = controller ? setTimeout(() => controller.abort(), REQUEST_TIMEOUT_MS) : null;
    let res;
    let timedOut = false;
    if (controller) controller.signal.addEventListener('abort', () => { timedOut = true; });
    try {
      res = await fetch(path, {
        method: 'GET',
        headers: { Accept: 'application/json' },
        cache: 'no-store',
        credentials: 'same-origin',
        signal: controller ? controller.signal : undefined,
      });
      if (!res.ok) {
        let code = '';
        let message = '';
        try {
          const body = await res.json();
          if (body && body.error) { code = String(body.error.code || ''); message = String(body.error.message || ''); }
        } catch (_) { /* not a JSON error body */ }
        throw new ApiError('http', res.status, code, message || ('HTTP ' + res.status));
      }
      try {
        return await res.json();
      } catch (e) {
        throw new ApiError('parse', res.status, '', 'unreadable answer');
      }
    } catch (e) {
      if (e instanceof ApiError) throw e;
      if (timedOut) throw new ApiError('timeout', 0, '', 'no answer');
      throw new ApiError('network', 0, '', 'server unreachable');
    } finally {
      if (timer) clearTimeout(timer);
    }
  }

  // Query values with encodeURIComponent (%20, never '+', which a server need not read as a space).
  function query(pairs) {
    return pairs.map((p) => encodeURIComponent(p[0]) + '=' + encodeURIComponent(p[1])).join('&');
  }
  function scopesPath() {
    const pairs = [];
    if (state.search) pairs.push(['search', state.search]);
    pairs.push(['sort', state.sort], ['order', state.order], ['limit', SCOPES_LIMIT], ['offset', state.offset]);
    return '/v1/admin/scopes?' + query(pairs);
  }
  // A scope name is 1-128 of A-Z a-z 0-9 . _ : -, all legal in a path segment: ':' is left as it is (a server
  // router need not percent-decode path parameters); anything else unexpected is percent-encoded.
  function replicasPath(scope) {
    return '/v1/admin/scopes/' + encodeURIComponent(scope).replace(/%3A/gi, ':') + '/replicas?' +
      query([['limit', REPLICAS_LIMIT], ['offset', state.replicasOffset]]);
  }

  // ---------------------------------------------------------------- polling

  function schedule(delay) {
    if (state.timer !== null) clearTimeout(state.timer);
    state.timer = setTimeout(tick, delay);
  }
  /** Refresh now (after a user action); if a request is in flight, right after it. */
  function requestRefresh() {
    if (state.inFlight) { state.pending = true; return; }
    schedule(0);
  }

  async function tick() {
    state.timer = null;
    if (state.inFlight) { state.pending = true; return; }   // never two polls at once
    state.inFlight = true;
    state.pending = false;
    const started = performance.now();
    state.requestStarted = started;
    let outcome = 'ok';
    try {
      outcome = await refresh();
    } catch (e) {
      outcome = 'error';
      if (window.console) console.error('dashboard refresh failed', e);
    } finally {
      state.inFlight = false;
      let delay;
      if (outcome === 'network' || outcome === 'timeout') {
        state.failures++;
        delay = Math.min(RETRY_MAX_MS, POLL_MS * Math.pow(2, state.failures - 1));
      } else {
        state.failures = 0;
        delay = outcome === 'auth' ? AUTH_RETRY_MS : POLL_MS;
      }
      if (state.pending && outcome === 'ok') delay = 0;
      else delay = Math.max(0, delay - (performance.now() - started));
      state.pending = false;
      schedule(delay);
    }
  }

  async function refresh() {
    const scopesVersion = state.scopesVersion;
    const replicasVersion = state.replicasVersion;
    const selected = state.selected;
    const jobs = [getJSON('/v1/admin/status'), getJSON(scopesPath())];
    if (selected !== null) jobs.push(getJSON(replicasPath(selected)));
    const [status, scopes, replicas] = await Promise.allSettled(jobs);

    const errors = [status, scopes].filter((r) => r.status === 'rejected').map((r) => r.reason);
    if (scopes.status === 'fulfilled' && scopesVersion === state.scopesVersion) {
      state.goodSort = { sort: state.sort, order: state.order };
    } else if (scopes.status === 'rejected' && scopesVersion === state.scopesVersion &&
      scopes.reason.kind === 'http' && scopes.reason.status === 400 && state.sort !== state.goodSort.sort) {
      // This server cannot sort by that column: turn its header off and go back to the last sort that worked.
      const th = document.querySelector('th[data-sort="' + state.sort + '"]');
      if (th) {
        th.removeAttribute('data-sort');
        th.removeAttribute('aria-sort');
        const button = th.querySelector('button');
        if (button) { button.disabled = true; button.title = 'this server cannot sort by this column'; }
      }
      state.sort = state.goodSort.sort;
      state.order = state.goodSort.order;
      state.offset = 0;
      markSortHeaders();
      scopesChanged();
      errors.splice(errors.indexOf(scopes.reason), 1);
    }
    if (status.status === 'fulfilled') renderStatus(status.value);
    if (scopes.status === 'fulfilled' && scopesVersion === state.scopesVersion) renderScopes(scopes.value);
    if (replicas && selected === state.selected && replicasVersion === state.replicasVersion) {
      if (replicas.status === 'fulfilled') renderReplicas(replicas.value, null);
      else renderReplicas(null, replicas.reason);
      if (replicas.status === 'rejected' && isAuth(replicas.reason)) errors.push(replicas.reason);
    }

    if (errors.length === 0) {
      setConnection('live', 'live');
      showAlert(null);
      const now = new Date();
      const updated = $('updated-at');
      setText(updated, 'updated ' + fmtClock(now));
      updated.setAttribute('data-ts', String(now.getTime()));
      return 'ok';
    }
    const auth = errors.find(isAuth);
    if (auth) {
      if (auth.status === 401) {
        setConnection('auth', 'not signed in');
        showAlert('admin credential required — reload the page and sign in with the admin password', 'auth');
      } else {
        setConnection('auth', 'forbidden');
        showAlert('this token is not an admin credential', 'auth');
      }
      return 'auth';
    }
    if (errors.some((e) => e.kind === 'network')) {
      setConnection('down', 'server unreachable, retrying');
      showAlert(null);
      return 'network';
    }
    if (errors.some((e) => e.kind === 'timeout')) {
      setConnection('down', 'server not answering, retrying');
      showAlert(null);
      return 'timeout';
    }
    const e = errors[0];
    setConnection('down', 'server error, retrying');
    showAlert('the admin API answered ' + (e.status || '') + (e.code ? ' ' + e.code : '') +
      (e.message && e.message !== 'HTTP ' + e.status ? ': ' + e.message : ''));
    return 'error';
  }

  /** While a poll goes unanswered (a busy server, or the browser asking for the admin password), say so. */
  function watchdog() {
    if (state.inFlight) {
      const waited = performance.now() - state.requestStarted;
      if (waited >= SLOW_MS) setConnection('pending', 'waiting for the server… ' + Math.floor(waited / 1000) + ' s');
    }
    setTimeout(watchdog, 1000);
  }

  function isAuth(e) { return e && e.kind === 'http' && (e.status === 401 || e.status === 403); }

  function setConnection(kind, text) {
    const c = $('connection');
    c.className = 'conn conn-' + kind;
    setAttr(c, 'data-state', kind);
    setText(c, text);
  }
  function showAlert(message, kind) {
    const a = $('alert');
    if (!message) { if (!a.hidden) a.hidden = true; return; }
    a.className = 'alert' + (kind ? ' ' + kind : '');
    setText(a, message);
    a.hidden = false;
  }

  // ---------------------------------------------------------------- status

  function renderStatus(s) {
    const server = s.server || {};
    const requests = s.requests || {};
    const latency = s.latency || {};
    const db = s.database || {};
    const conns = s.connections || {};
    const events = s.events || {};

    if (server.startedAt && isNum(server.uptimeSeconds)) {
      const started = Date.parse(server.startedAt);
      if (isFinite(started)) {
        state.clockSkewMs = started + server.uptimeSeconds * 1000 - Date.now();
        state.startedSec = started / 1000;
      }
    }
    setText($('server-domain'), server.domain ? '· ' + server.domain : '');
    setText($('uptime'), fmtDuration(server.uptimeSeconds));
    const startedAt = Date.parse(server.startedAt);
    setText($('started-at'), isFinite(startedAt) ? 'since ' + fmtDateTime(new Date(startedAt)) : '');
    setText($('version'), server.version || '–');
    setText($('domain'), server.domain || '–');
    setText($('memory'), isNum(server.residentBytes) ? nf1.format(server.residentBytes / 1048576) + ' MiB' : 'n/a');
    setText($('req-rate'), fmtRate(requests.perSecond));
    setText($('req-total'), fmtInt(requests.total));

    renderLatency('push', latency.push);
    renderLatency('pull', latency.pull);

    const inUse = isNum(db.inUse) ? db.inUse : null;
    const pool = isNum(db.poolSize) ? db.poolSize : null;
    setText($('db-pool'), fmtInt(inUse) + ' / ' + fmtInt(pool) + ' in use');
    const waiting = isNum(db.admitted) && inUse !== null ? Math.max(0, db.admitted - inUse) : null;
    setText($('db-queue'), 'admitted ' + fmtInt(db.admitted) + ' · waiting ' + fmtInt(waiting) +
      ' · limit ' + fmtInt(db.queueLimit));
    const meter = $('db-meter');
    const frac = pool ? Math.min(1, (inUse || 0) / pool) : 0;
    meter.style.width = (frac * 100).toFixed(1) + '%';
    setClass(meter, 'high', frac >= 0.9);

    const live = isNum(conns.liveStreams) ? conns.liveStreams : 0;
    const polls = isNum(conns.longPolls) ? conns.longPolls : 0;
    setText($('devices'), fmtInt(live + polls));
    const plural = (n, one, many) => fmtInt(n) + ' ' + (n === 1 ? one : many);
    setText($('devices-sub'), plural(conns.liveStreams, 'stream', 'streams') + ' · ' +
      plural(conns.longPolls, 'long-poll', 'long-polls') + ' (' + fmtInt(conns.parkedLongPolls) + ' parked)');

    setText($('ev-accepted'), fmtInt(events.accepted));
    setText($('ev-duplicate'), fmtInt(events.duplicate));
    setText($('ev-rejected'), fmtInt(events.rejected));
    setText($('ev-pulled'), fmtInt(events.pulled));

    renderErrors(Array.isArray(s.errors) ? s.errors : []);
    renderRoutes(Array.isArray(requests.byRoute) ? requests.byRoute : []);

    state.lastSeries = Array.isArray(s.series) ? s.series : [];
    drawCharts();
  }

  function renderLatency(kind, l) {
    l = l || {};
    if (!isNum(l.count) || l.count === 0) {
      setText($(kind + '-latency'), '–');
      setText($(kind + '-latency-sub'), 'no ' + kind + ' requests');
      return;
    }
    setText($(kind + '-latency'), fmtMs(l.p50Ms) + ' / ' + fmtMs(l.p99Ms) + ' ms');
    setText($(kind + '-latency-sub'), 'p50 / p99 · p90 ' + fmtMs(l.p90Ms) + ' ms · ' + fmtInt(l.count) + ' req');
  }

  function renderErrors(list) {
    const body = $('errors-body');
    reconcile(body, list, (e) => e.code + ' ' + e.status, 'data-error',
      () => el('tr', null, [
        el('td', { 'data-field': 'code', className: 'mono' }),
        el('td', { 'data-field': 'status', className: 'num' }),
        el('td', { 'data-field': 'count', className: 'num' }),
      ]),
      (tr, e) => {
        const c = cells(tr);
        setCell(c.code, e.code || '–', null);
        setCell(c.status, isNum(e.status) ? String(e.status) : '–', isNum(e.status) ? e.status : null);
        setCell(c.count, fmtInt(e.count), isNum(e.count) ? e.count : null);
        setClass(c.status, 'bad', isNum(e.status) && e.status >= 500);
      });
    $('errors-empty').hidden = list.length > 0;
  }

  const RATE_WINDOW_MS = 10000;
  /** Requests per second of each route over the last ~10 s, from the totals of successive polls. */
  function routeRates(list) {
    const now = performance.now();
    const counts = new Map();
    for (const r of list) if (isNum(r.count)) counts.set(r.method + ' ' + r.route, r.count);
    const samples = state.routeSamples;
    samples.push({ at: now, counts: counts });
    while (samples.length > 2 && now - samples[1].at >= RATE_WINDOW_MS) samples.shift();
    const rates = new Map();
    const first = samples[0];
    const dt = (now - first.at) / 1000;
    if (samples.length < 2 || dt < 0.5) return rates;
    for (const [key, count] of counts) {
      const before = first.counts.has(key) ? first.counts.get(key) : 0;
      rates.set(key, Math.max(0, (count - before) / dt));
    }
    return rates;
  }

  function renderRoutes(list) {
    const body = $('routes-body');
    const derived = routeRates(list);
    reconcile(body, list, (r) => r.method + ' ' + r.route, 'data-route',
      () => el('tr', null, [
        el('td', { 'data-field': 'method' }),
        el('td', { 'data-field': 'route', className: 'mono' }),
        el('td', { 'data-field': 'count', className: 'num' }),
        el('td', { 'data-field': 'perSecond', className: 'num' }),
        el('td', { 'data-field': 'errors', className: 'num' }),
        el('td', { 'data-field': 'p50Ms', className: 'num' }),
        el('td', { 'data-field': 'p99Ms', className: 'num' }),
      ]),
      (tr, r) => {
        const c = cells(tr);
        setCell(c.method, r.method || '', null);
        setCell(c.route, r.route || '', null, r.route || '');
        setCell(c.count, fmtInt(r.count), isNum(r.count) ? r.count : null);
        const rate = isNum(r.perSecond) ? r.perSecond : derived.get(r.method + ' ' + r.route);
        setCell(c.perSecond, fmtRate(rate), isNum(rate) ? rate : null,
          isNum(r.perSecond) ? null : 'from the counts of the last seconds');
        setCell(c.errors, fmtInt(r.errors), isNum(r.errors) ? r.errors : null);
        setClass(c.errors, 'bad', isNum(r.errors) && r.errors > 0);
        setCell(c.p50Ms, isNum(r.p50Ms) ? fmtMs(r.p50Ms) + ' ms' : '–', isNum(r.p50Ms) ? r.p50Ms : null);
        setCell(c.p99Ms, isNum(r.p99Ms) ? fmtMs(r.p99Ms) + ' ms' : '–', isNum(r.p99Ms) ? r.p99Ms : null);
      });
    $('routes-empty').hidden = list.length > 0;
  }

  // ---------------------------------------------------------------- charts

  const CHARTS = [
    // A second missing from the series had no request: its counts are 0, its latencies a gap.
    { id: 'chart-events', unit: 'events/s', series: [
      { key: 'eventsAccepted', color: '--c1', missing: 0 }, { key: 'eventsPulled', color: '--c2', missing: 0 }] },
    { id: 'chart-latency', unit: 'ms p99', series: [
      { key: 'pushP99Ms', color: '--c3', missing: null }, { key: 'pullP99Ms', color: '--c4', missing: null }] },
  ];

  function niceStep(range, ticks) {
    const raw = range / Math.max(1, ticks);
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const n = raw / mag;
    return (n <= 1 ? 1 : n <= 2 ? 2 : n <= 2.5 ? 2.5 : n <= 5 ? 5 : 10) * mag;
  }
  function fmtAxis(v) {
    if (v >= 1e6) return nf2.format(v / 1e6) + 'M';
    if (v >= 1e4) return nf2.format(v / 1e3) + 'k';
    return nf2.format(v);
  }

  function drawCharts() {
    const styles = getComputedStyle(document.documentElement);
    for (const chart of CHARTS) drawChart($(chart.id), chart, state.lastSeries, styles);
  }

  function drawChart(canvas, chart, series, styles) {
    if (!canvas || !canvas.getContext) return;
    const cssW = Math.max(100, canvas.clientWidth);
    const cssH = Math.max(80, canvas.clientHeight);
    const dpr = window.devicePixelRatio || 1;
    const pw = Math.round(cssW * dpr);
    const ph = Math.round(cssH * dpr);
    if (canvas.width !== pw || canvas.height !== ph) { canvas.width = pw; canvas.height = ph; }
    const ctx = canvas.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, cssW, cssH);

    const font = getComputedStyle(document.body).fontFamily;
    const ink = styles.getPropertyValue('--muted').trim() || '#5f6b7a';
    const grid = styles.getPropertyValue('--line').trim() || '#e1e5eb';
    const pad = { l: 52, r: 10, t: 22, b: 22 };
    const w = cssW - pad.l - pad.r;
    const h = cssH - pad.t - pad.b;

    // The window ends at the last complete second of the server's clock.
    const byT = new Map();
    for (const p of series) if (p && isNum(p.t)) byT.set(p.t, p);
    const serverNow = Math.floor((Date.now() + state.clockSkewMs) / 1000);
    const tEnd = serverNow - 1;
    const tStart = tEnd - SERIES_WINDOW;
    // The server keeps the last 300 seconds, the current one included: the complete ones are tEnd-298 ... tEnd.
    const tFirst = Math.max(tEnd - (SERIES_WINDOW - 2), isNum(state.startedSec) ? Math.ceil(state.startedSec) : -Infinity);
    const values = chart.series.map((s) => {
      const out = [];
      for (let t = tFirst; t <= tEnd; t++) {
        const p = byT.get(t);
        const v = p ? p[s.key] : undefined;
        out.push([t, isNum(v) ? v : (p && s.missing === 0 ? 0 : s.missing)]);
      }
      return out;
    });
    let max = 0;
    for (const vs of values) for (const [, v] of vs) if (isNum(v) && v > max) max = v;
    if (max <= 0) max = 1;
    const step = niceStep(max, 4);
    const top = Math.ceil(max / step) * step;
    const x = (t) => pad.l + ((t - tStart) / SERIES_WINDOW) * w;
    const y = (v) => pad.t + h - (v / top) * h;

    // grid and y labels
    ctx.font = '11px ' + font;
    ctx.lineWidth = 1;
    ctx.textBaseline = 'middle';
    ctx.textAlign = 'right';
    for (let v = 0; v <= top + step / 2; v += step) {
      const yy = Math.round(y(v)) + 0.5;
      ctx.strokeStyle = grid;
      ctx.beginPath(); ctx.moveTo(pad.l, yy); ctx.lineTo(pad.l + w, yy); ctx.stroke();
      ctx.fillStyle = ink;
      ctx.fillText(fmtAxis(v), pad.l - 6, yy);
    }
    ctx.textAlign = 'left';
    ctx.textBaseline = 'top';
    ctx.fillText(chart.unit, 4, 2);
    // x labels: one a minute, relative to the newest second
    ctx.textBaseline = 'top';
    for (let k = 0; k * 60 <= SERIES_WINDOW; k++) {
      const t = tEnd - k * 60;
      const xx = Math.round(x(t)) + 0.5;
      ctx.strokeStyle = grid;
      ctx.beginPath(); ctx.moveTo(xx, pad.t + h); ctx.lineTo(xx, pad.t + h + 4); ctx.stroke();
      ctx.fillStyle = ink;
      ctx.textAlign = k === 0 ? 'right' : (k * 60 === SERIES_WINDOW ? 'left' : 'center');
      ctx.fillText(k === 0 ? 'now' : '−' + k + ' min', xx, pad.t + h + 6);
    }
    // axis line
    ctx.strokeStyle = ink;
    ctx.beginPath(); ctx.moveTo(pad.l, Math.round(pad.t + h) + 0.5); ctx.lineTo(pad.l + w, Math.round(pad.t + h) + 0.5); ctx.stroke();

    if (!byT.size) {
      ctx.fillStyle = ink;
      ctx.textAlign = 'center';
      ctx.textBaseline = 'middle';
      ctx.fillText('no data yet', pad.l + w / 2, pad.t + h / 2);
      return;
    }

    // series: a null value, or a missing second, breaks the line; a lone point is drawn as a dot
    ctx.save();
    ctx.beginPath(); ctx.rect(pad.l, pad.t - 2, w + 2, h + 4); ctx.clip();
    ctx.lineJoin = 'round';
    ctx.lineCap = 'round';
    chart.series.forEach((s, index) => {
      const color = styles.getPropertyValue(s.color).trim() || '#333';
      ctx.strokeStyle = color;
      ctx.fillStyle = color;
      ctx.lineWidth = 1.75;
      let run = [];
      const flush = () => {
        if (run.length === 1) {
          ctx.beginPath(); ctx.arc(run[0][0], run[0][1], 2, 0, Math.PI * 2); ctx.fill();
        } else if (run.length > 1) {
          ctx.beginPath();
          ctx.moveTo(run[0][0], run[0][1]);
          for (let i = 1; i < run.length; i++) ctx.lineTo(run[i][0], run[i][1]);
          ctx.stroke();
        }
        run = [];
      };
      for (const [t, v] of values[index]) {
        if (isNum(v)) run.push([x(t), y(v)]);
        else flush();
      }
      flush();
    });
    ctx.restore();
  }

  // ---------------------------------------------------------------- scopes

  function renderScopes(data) {
    const list = Array.isArray(data.scopes) ? data.scopes : [];
    const total = isNum(data.total) ? data.total : list.length;
    const offset = isNum(data.offset) ? data.offset : state.offset;

    // the list shrank under the current page (search, deletions): go to the last page that exists
    if (list.length === 0 && total > 0 && offset > 0) {
      state.offset = Math.max(0, Math.floor((total - 1) / SCOPES_LIMIT) * SCOPES_LIMIT);
      state.scopesVersion++;
      saveHash();
      requestRefresh();
      return;
    }

    const totalEl = $('scopes-total');
    setText(totalEl, fmtInt(total) + (state.search ? ' matching' : ''));
    totalEl.setAttribute('data-value', String(total));
    setText($('scopes-range'), list.length ? nf.format(offset + 1) + '–' + nf.format(offset + list.length) +
      ' of ' + nf.format(total) : '0 of ' + nf.format(total));
    $('scopes-prev').disabled = offset <= 0;
    $('scopes-next').disabled = offset + list.length >= total;
    $('scopes-empty').hidden = list.length > 0;
    setText($('scopes-empty'), state.search ? 'no scope matches “' + state.search + '”' : 'no scopes');

    reconcile($('scopes-body'), list, (s) => s.scope, 'data-scope', createScopeRow, updateScopeRow);
  }

  function createScopeRow() {
    const tr = el('tr', { tabindex: '0' }, [
      el('td', { 'data-field': 'scope', className: 'mono' }),
      el('td', { 'data-field': 'head', className: 'num' }),
      el('td', { 'data-field': 'storedEvents', className: 'num' }),
      el('td', { 'data-field': 'bytes', className: 'num' }),
      el('td', { 'data-field': 'stable', className: 'num' }),
      el('td', { 'data-field': 'stableLag', className: 'num' }),
      el('td', { 'data-field': 'replicas', className: 'num' }),
      el('td', { 'data-field': 'compactedAt' }),
      el('td', { 'data-field': 'eventsPerSecond', className: 'num' }),
    ]);
    return tr;
  }

  function updateScopeRow(tr, s) {
    const c = cells(tr);
    const num = (v) => (isNum(v) ? v : null);
    setCell(c.scope, s.scope, null, s.scope);
    setCell(c.head, fmtInt(s.head), num(s.head));
    setCell(c.storedEvents, fmtInt(s.storedEvents), num(s.storedEvents),
      isNum(s.retainedFrom) ? 'retained from event ' + nf.format(s.retainedFrom) : null);
    let bytesText = fmtBytes(s.bytes);
    if (isNum(s.blobBytes) && s.blobBytes > 0) bytesText += ' + ' + fmtBytes(s.blobBytes) + ' blobs';
    setCell(c.bytes, bytesText, num(s.bytes),
      isNum(s.bytes) ? nf.format(s.bytes) + ' bytes of events, ' + nf.format(s.blobBytes || 0) + ' bytes of blobs' : null);
    setAttr(c.bytes, 'data-blob-bytes', num(s.blobBytes));
    setCell(c.stable, fmtInt(s.stable), num(s.stable), isNum(s.stable) ? null : 'no active replica');
    setCell(c.stableLag, fmtInt(s.stableLag), num(s.stableLag), isNum(s.stableLag) ? null : 'no active replica');
    setCell(c.replicas, fmtInt(s.replicas), num(s.replicas));
    if (s.compactedAt) {
      const ago = secondsSince(s.compactedAt);
      const at = Date.parse(s.compactedAt);
      setCell(c.compactedAt, fmtAgo(ago) + ' · freed ' + fmtInt(s.compactionRemoved) + ' events', s.compactedAt,
        (isFinite(at) ? fmtDateTime(new Date(at)) : s.compactedAt) + ' — compacted through event ' +
        fmtInt(s.compactedThrough));
    } else {
      setCell(c.compactedAt, 'never', null);
    }
    setAttr(c.compactedAt, 'data-removed', num(s.compactionRemoved));
    setAttr(c.compactedAt, 'data-through', num(s.compactedThrough));
    setCell(c.eventsPerSecond, fmtRate(s.eventsPerSecond), num(s.eventsPerSecond));
    setClass(tr, 'selected', s.scope === state.selected);
    setAttr(tr, 'aria-selected', s.scope === state.selected ? 'true' : 'false');
  }

  function markSelectedRow() {
    for (const tr of $('scopes-body').children) {
      const on = tr.getAttribute('data-scope') === state.selected;
      setClass(tr, 'selected', on);
      setAttr(tr, 'aria-selected', on ? 'true' : 'false');
    }
  }

  // ---------------------------------------------------------------- replicas

  function selectScope(scope) {
    const section = $('replicas');
    if (scope === state.selected) return;
    state.selected = scope;
    state.replicasOffset = 0;
    state.replicasVersion++;
    markSelectedRow();
    if (scope === null) {
      section.hidden = true;
      section.setAttribute('data-scope', '');
      reconcile($('replicas-body'), [], () => '', 'data-replica', null, null);
    } else {
      section.hidden = false;
      section.setAttribute('data-scope', scope);
      setText($('replicas-scope'), scope);
      setText($('replicas-total'), '…');
      $('replicas-total').setAttribute('data-value', '');
      setText($('replicas-summary'), '');
      setText($('replicas-range'), '');
      $('replicas-message').hidden = true;
      $('replicas-empty').hidden = true;
      reconcile($('replicas-body'), [], () => '', 'data-replica', null, null);
      $('replicas-prev').disabled = true;
      $('replicas-next').disabled = true;
    }
    saveHash();
    requestRefresh();
  }

  function renderReplicas(data, error) {
    const msg = $('replicas-message');
    if (error) {
      if (error.kind === 'http' && error.status === 404) {
        msg.hidden = false;
        setText(msg, 'scope “' + state.selected + '” not found');
        reconcile($('replicas-body'), [], () => '', 'data-replica', null, null);
        setText($('replicas-total'), '–');
        $('replicas-empty').hidden = true;
      } else if (!isAuth(error) && error.kind !== 'network') {
        msg.hidden = false;
        setText(msg, 'could not load replicas: ' + (error.status || '') + ' ' + (error.code || error.message));
      }
      return;
    }
    msg.hidden = true;
    const list = Array.isArray(data.replicas) ? data.replicas : [];
    const total = isNum(data.total) ? data.total : list.length;
    const offset = isNum(data.offset) ? data.offset : state.replicasOffset;
    if (list.length === 0 && total > 0 && offset > 0) {
      state.replicasOffset = Math.max(0, Math.floor((total - 1) / REPLICAS_LIMIT) * REPLICAS_LIMIT);
      state.replicasVersion++;
      requestRefresh();
      return;
    }
    const totalEl = $('replicas-total');
    setText(totalEl, fmtInt(total));
    totalEl.setAttribute('data-value', String(total));
    setText($('replicas-summary'), 'events ' + fmtInt(data.head) + ' · stable point ' + fmtInt(data.stable));
    setText($('replicas-range'), list.length ? nf.format(offset + 1) + '–' + nf.format(offset + list.length) +
      ' of ' + nf.format(total) : '');
    $('replicas-prev').disabled = offset <= 0;
    $('replicas-next').disabled = offset + list.length >= total;
    $('replicas-empty').hidden = list.length > 0;

    reconcile($('replicas-body'), list, (r) => r.replica, 'data-replica',
      () => el('tr', null, [
        el('td', { 'data-field': 'replica', className: 'mono' }),
        el('td', { 'data-field': 'acknowledged', className: 'num' }),
        el('td', { 'data-field': 'behind', className: 'num' }),
        el('td', { 'data-field': 'seenAt' }),
        el('td', { 'data-field': 'active' }, [el('span', { className: 'badge' })]),
        el('td', { 'data-field': 'holdsStable' }),
      ]),
      (tr, r) => {
        const c = cells(tr);
        const num = (v) => (isNum(v) ? v : null);
        setCell(c.replica, r.replica, null, r.replica);
        setCell(c.acknowledged, fmtInt(r.acknowledged), num(r.acknowledged));
        setCell(c.behind, fmtInt(r.behind), num(r.behind));
        const ago = isNum(r.secondsSinceSeen) ? r.secondsSinceSeen : (r.seenAt ? secondsSince(r.seenAt) : null);
        const seen = Date.parse(r.seenAt);
        setCell(c.seenAt, fmtAgo(ago), r.seenAt || null, isFinite(seen) ? fmtDateTime(new Date(seen)) : null);
        const badge = c.active.firstChild;
        setText(badge, r.active ? 'active' : 'inactive');
        badge.className = 'badge ' + (r.active ? 'yes' : 'no');
        setAttr(c.active, 'data-value', r.active ? 'true' : 'false');
        setAttr(c.holdsStable, 'data-value', r.holdsStable ? 'true' : 'false');
        if (r.holdsStable && !c.holdsStable.firstChild) {
          c.holdsStable.appendChild(el('span', { className: 'badge hold', text: 'holds stable point',
            title: 'this replica is the slowest active one: the stable point waits for it' }));
        } else if (!r.holdsStable && c.holdsStable.firstChild) {
          c.holdsStable.textContent = '';
        }
        setClass(tr, 'holds', !!r.holdsStable);
      });
  }

  // ---------------------------------------------------------------- state in the URL fragment (survives a reload)

  function saveHash() {
    const q = new URLSearchParams();
    if (state.search) q.set('q', state.search);
    if (state.sort !== 'scope') q.set('sort', state.sort);
    if (state.order !== 'asc') q.set('order', state.order);
    if (state.offset) q.set('offset', String(state.offset));
    if (state.selected !== null) q.set('scope', state.selected);
    const hash = q.toString();
    try {
      history.replaceState(null, '', location.pathname + location.search + (hash ? '#' + hash : ''));
    } catch (_) { /* ignore */ }
  }
  function loadHash() {
    const q = new URLSearchParams(location.hash.replace(/^#/, ''));
    state.search = q.get('q') || '';
    const sort = q.get('sort');
    if (sort && SORT_KEYS.indexOf(sort) >= 0) state.sort = sort;
    const order = q.get('order');
    if (order === 'asc' || order === 'desc') state.order = order;
    const offset = parseInt(q.get('offset') || '0', 10);
    if (isFinite(offset) && offset > 0) state.offset = offset - (offset % SCOPES_LIMIT);
    const scope = q.get('scope');
    return scope;
  }

  function markSortHeaders() {
    for (const th of document.querySelectorAll('th[data-sort]')) {
      const key = th.getAttribute('data-sort');
      if (key === state.sort) th.setAttribute('aria-sort', state.order === 'asc' ? 'ascending' : 'descending');
      else th.removeAttribute('aria-sort');
    }
  }

  // ---------------------------------------------------------------- wiring

  function scopesChanged() {
    state.scopesVersion++;
    saveHash();
    requestRefresh();
  }

  function init() {
    const initialScope = loadHash();
    $('scope-search').value = state.search;
    markSortHeaders();

    let searchTimer = null;
    $('scope-search').addEventListener('input', () => {
      if (searchTimer) clearTimeout(searchTimer);
      searchTimer = setTimeout(() => {
        const value = $('scope-search').value.trim();
        if (value === state.search) return;
        state.search = value;
        state.offset = 0;
        scopesChanged();
      }, 250);
    });

    for (const th of document.querySelectorAll('th[data-sort]')) {
      th.querySelector('button').addEventListener('click', () => {
        const key = th.getAttribute('data-sort');
        if (!key) return;
        if (state.sort === key) state.order = state.order === 'asc' ? 'desc' : 'asc';
        else { state.sort = key; state.order = key === 'scope' ? 'asc' : 'desc'; }
        state.offset = 0;
        markSortHeaders();
        scopesChanged();
      });
    }

    $('scopes-prev').addEventListener('click', () => {
      if (state.offset <= 0) return;
      state.offset = Math.max(0, state.offset - SCOPES_LIMIT);
      scopesChanged();
    });
    $('scopes-next').addEventListener('click', () => {
      state.offset += SCOPES_LIMIT;
      scopesChanged();
    });

    const body = $('scopes-body');
    body.addEventListener('click', (ev) => {
      const tr = ev.target.closest('tr[data-scope]');
      if (tr && body.contains(tr)) selectScope(tr.getAttribute('data-scope'));
    });
    body.addEventListener('keydown', (ev) => {
      if (ev.key !== 'Enter' && ev.key !== ' ') return;
      const tr = ev.target.closest('tr[data-scope]');
      if (tr) { ev.preventDefault(); selectScope(tr.getAttribute('data-scope')); }
    });

    $('replicas-prev').addEventListener('click', () => {
      if (state.replicasOffset <= 0) return;
      state.replicasOffset = Math.max(0, state.replicasOffset - REPLICAS_LIMIT);
      state.replicasVersion++;
      requestRefresh();
    });
    $('replicas-next').addEventListener('click', () => {
      state.replicasOffset += REPLICAS_LIMIT;
      state.replicasVersion++;
      requestRefresh();
    });
    $('replicas-close').addEventListener('click', () => selectScope(null));

    let resizeTimer = null;
    window.addEventListener('resize', () => {
      if (resizeTimer) clearTimeout(resizeTimer);
      resizeTimer = setTimeout(drawCharts, 100);
    });

    drawCharts();
    setTimeout(watchdog, 1000);
    if (initialScope) selectScope(initialScope);
    else schedule(0);
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', init);
  else init();
})();
