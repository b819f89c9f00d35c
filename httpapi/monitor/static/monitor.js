// leaf monitor: reads ../v2/status/summary every second (a bounded view:
// the busiest tags, the degraded ones, totals and the worker, whatever the
// number of tags), the samples taken since the last read from
// ../v2/status/history (drawn as charts of the last 10 minutes), a page of
// the tags found by name when a search is on,
// and a page of the store's rows from ../v2/tags when they may have
// changed, and renders them. Data only ever enters the page through
// textContent, never as markup. URLs are relative to the page
// (…/monitor/), so it also works behind a path prefix.
'use strict';

const REFRESH_MS = 1000;
const ROWS_EVERY = 10; // refreshes between reads of the store's rows, at most
const TIMEOUT_MS = 5000;
const TOP = 20; // busiest tags shown
const SEARCH_LIMIT = 20; // tags per page of search results
const ROWS_LIMIT = 50; // store rows per page
const REASONS_SHOWN = 10; // degraded reasons listed in the header

const $ = (sel, root = document) => root.querySelector(sel);

// set writes text (and optionally a tooltip) into root's [data-field=name].
function set(root, name, text, title) {
  const el = root.querySelector(`[data-field="${name}"]`);
  el.textContent = text;
  if (title !== undefined) el.title = title;
  return el;
}

// parse is JSON.parse, except that integers beyond 2^53 (IDs near the top of
// the 63-bit range) are kept as their exact decimal text where the browser
// hands the reviver the source.
function parse(text) {
  return JSON.parse(text, (key, value, ctx) =>
    Number.isInteger(value) && !Number.isSafeInteger(value) && ctx && ctx.source ? ctx.source : value);
}

// The admin token, when the server wants one, lives in this tab's
// sessionStorage only: it is gone when the tab closes.
const TOKEN_KEY = 'leaf-admin-token';
const token = () => sessionStorage.getItem(TOKEN_KEY) || '';

// getJSON fetches an API path, with the admin token if one was given; a
// failure throws an Error whose message is the server's {"error"} when there
// is one, and whose status is the HTTP status.
async function getJSON(path) {
  const headers = token() ? {Authorization: `Bearer ${token()}`} : {};
  const resp = await fetch('../' + path, {cache: 'no-store', headers, signal: AbortSignal.timeout(TIMEOUT_MS)});
  const text = await resp.text();
  let body = null;
  try {
    body = parse(text);
  } catch {
    // not JSON: reported below
  }
  if (!resp.ok) {
    const why = body && body.error ? body.error : resp.statusText || text.trim();
    const err = new Error(`${resp.status}: ${why}`);
    err.status = resp.status;
    throw err;
  }
  if (body === null) throw new Error(`${path}: the answer is not JSON`);
  return body;
}

// ---- formatting

const grouped = new Intl.NumberFormat('en-US');
const count = (n) => (typeof n === 'string' ? n : grouped.format(n));
const rate = (r) => (r >= 100 ? grouped.format(Math.round(r)) : r.toFixed(1));
const isSet = (iso) => Boolean(iso) && Date.parse(iso) > 0; // Go's zero time is year 1

function duration(s) {
  s = Math.abs(s);
  if (s < 10) return `${s.toFixed(1)} s`;
  if (s < 120) return `${Math.round(s)} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  if (s < 172800) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86400)} d`;
}

// when formats a time as local HH:MM:SS and how long ago or ahead it is.
function when(iso) {
  if (!isSet(iso)) return 'never';
  const t = new Date(iso);
  const d = (t.getTime() - Date.now()) / 1000;
  return `${t.toLocaleTimeString()} (${d >= 0 ? 'in ' + duration(d) : duration(d) + ' ago'})`;
}

// ---- header

// renderState shows the state badge and the first reasons; total is how
// many reasons there are.
function renderState(state, text, reasons, total = reasons.length) {
  const badge = $('#state');
  badge.dataset.state = state;
  badge.textContent = text;
  const list = $('#reasons');
  const items = reasons.slice(0, REASONS_SHOWN).map((r) => {
    const li = document.createElement('li');
    li.textContent = r;
    return li;
  });
  if (total > items.length) {
    const li = document.createElement('li');
    li.className = 'muted';
    li.textContent = `… and ${count(total - items.length)} more`;
    items.push(li);
  }
  list.replaceChildren(...items);
  list.hidden = reasons.length === 0;
}

// ---- segment buffers

// TagTable keeps a table body's rows (one per tag, reused across refreshes
// so that the page does not flicker) in the order of the tags given.
class TagTable {
  constructor(body) {
    this.body = body;
    this.rows = new Map(); // tag -> <tr>
  }

  render(tags) {
    const seen = new Set();
    tags.forEach((t, i) => {
      seen.add(t.tag);
      let row = this.rows.get(t.tag);
      if (!row) {
        row = $('#tag-row').content.firstElementChild.cloneNode(true);
        row.dataset.tag = t.tag;
        this.rows.set(t.tag, row);
      }
      if (this.body.children[i] !== row) this.body.insertBefore(row, this.body.children[i] || null);
      renderTag(row, t);
    });
    for (const [tag, row] of this.rows) {
      if (!seen.has(tag)) {
        row.remove();
        this.rows.delete(tag);
      }
    }
  }
}

const topTable = new TagTable($('#tags-body'));
const degradedTable = new TagTable($('#degraded-body'));
const searchTable = new TagTable($('#search-body'));

function renderSegment(seg, hidden) {
  $('#segment-off').hidden = seg.enabled;
  const detail = seg.enabled && !hidden;
  $('#tags').hidden = !detail;
  $('#top-title').hidden = !detail;
  $('#totals').hidden = !detail;
  const top = detail ? seg.top : [];
  const degraded = detail ? seg.degraded_tags : [];
  $('#tags-empty').hidden = !seg.enabled || top.length > 0;
  topTable.render(top);
  degradedTable.render(degraded);
  $('#degraded-box').hidden = degraded.length === 0;
  $('#degraded-count').textContent =
    seg.degraded_tags_count > degraded.length ? `${degraded.length} of ${count(seg.degraded_tags_count)}` : '';
  renderDatabases(detail && seg.databases ? seg.databases : []);
  if (!detail) return;
  const totals = $('#totals');
  set(totals, 'tags_known', count(seg.tags_known));
  set(totals, 'tags_in_use', count(seg.tags_in_use));
  set(totals, 'ids_per_sec', rate(seg.ids_per_sec));
  set(totals, 'issued', count(seg.issued));
  set(totals, 'store', seg.store_ok ? 'ok' : 'unreachable').dataset.level = seg.store_ok ? '' : 'bad';
}

// renderDatabases fills the table of a store spread over several databases
// (at most 64 rows, rebuilt each time); hidden for a store of one.
function renderDatabases(dbs) {
  $('#databases-box').hidden = dbs.length === 0;
  const rows = dbs.map((d) => {
    const tr = document.createElement('tr');
    const cell = (text, cls, level) => {
      const td = document.createElement('td');
      td.textContent = text;
      if (cls) td.className = cls;
      if (level) td.dataset.level = level;
      tr.append(td);
    };
    cell(String(d.index), 'num');
    cell(d.name);
    const health = !d.verified ? 'unverified' : d.healthy ? 'up' : `down, retried ${when(d.retry_at)}`;
    cell(health, '', d.healthy && d.verified ? '' : 'bad');
    cell(count(d.reserves), 'num');
    cell(count(d.failures), 'num', d.failures > 0 ? 'warn' : '');
    cell(String(d.highest_id), 'num');
    cell(d.last_error || '');
    return tr;
  });
  $('#databases-body').replaceChildren(...rows);
}

function renderTag(row, t) {
  set(row, 'tag', t.tag);
  // A periodic tag restarts each period: which one its IDs are in now.
  set(row, 'period', t.period ? `period ${t.period}` : '').hidden = !t.period;
  // A formatted tag's IDs are written by its format: a prefix, the period,
  // a sequence of fixed width that /readyz warns about before it runs out.
  set(row, 'format', t.format ? `format ${t.format}` : '').hidden = !t.format;
  set(row, 'opaque', t.opaque_bits ? `opaque ${t.opaque_bits} bits` : '').hidden = !t.opaque_bits;
  set(row, 'state', !t.init_ok ? 'not loaded' : t.loading ? 'loading' : '');
  // A degraded tag's reason, without the "tag NAME: " it leads with.
  const reason = t.reason ? t.reason.replace(/^tag \S+: /, '') : '';
  set(row, 'load_error', t.load_error || reason);
  row.classList.toggle('failing', Boolean(t.load_error));
  t.buffers.forEach((b, i) => {
    const state = i === t.pos ? (t.init_ok ? 'current' : 'empty') : t.next_ready ? 'next' : t.loading ? 'loading' : 'empty';
    renderBuffer(row.querySelector(`[data-buf="${i}"]`), b, state, !t.next_ready);
  });
  set(row, 'step', count(t.step));
  set(row, 'min_step', count(t.min_step));
  set(row, 'ids_per_sec', rate(t.ids_per_sec));
  set(row, 'remaining', count(t.remaining));
  const left = t.seconds_left;
  const dry = set(row, 'seconds_left', left < 0 ? '∞ idle' : duration(left));
  dry.dataset.level = left < 0 ? '' : left < 10 ? 'bad' : left < 60 ? 'warn' : '';
  set(row, 'issued', count(t.issued));
  set(row, 'loads', count(t.loads));
  set(row, 'waits', count(t.waits));
  set(row, 'load_errors', count(t.load_errors)).dataset.level = t.load_errors > 0 ? 'warn' : '';
  set(row, 'last_load', when(t.last_load), isSet(t.last_load) ? t.last_load : '');
}

// renderBuffer shows one buffer; alone says that the other holds no range,
// so that a current range running low is a warning.
function renderBuffer(el, b, state, alone) {
  // BigInt: the bounds may be exact decimal strings beyond 2^53 (see parse).
  const size = Number(BigInt(b.max) - BigInt(b.start));
  const unused = Number(BigInt(b.max) - BigInt(b.value));
  const left = state === 'empty' || size <= 0 ? 0 : Math.max(0, unused) / size;
  const pct = Math.round(left * 1000) / 10;
  el.dataset.state = state;
  el.dataset.current = String(state === 'current');
  el.dataset.fill = state !== 'current' || !alone || left >= 0.5 ? 'ok' : left < 0.1 ? 'bad' : 'warn';
  set(el, 'buf_state', state);
  const bar = el.querySelector('.bar');
  bar.setAttribute('aria-valuenow', String(pct));
  bar.title = `${pct}% of the range left`;
  el.querySelector('.fill').style.width = `${pct}%`;
  const loaded = size > 0;
  set(el, 'range', loaded ? `[${b.start}, ${b.max})` : '–');
  set(el, 'value', loaded ? String(b.value) : '–');
}

// ---- search and paging

// A paged listing: the name prefix searched, the cursor of the page shown
// ('' for the first) and of the next (null on the last page).
// seq numbers the reads, so that only the latest one's answer is shown
// when a click and the refresh loop overlap.
const search = {prefix: '', after: '', next: null, on: false, seq: 0};
const rowsPage = {after: '', next: null, seq: 0};

// pageQuery builds a listing's query string.
function pageQuery(prefix, after, limit) {
  const q = new URLSearchParams({limit: String(limit)});
  if (prefix) q.set('prefix', prefix);
  if (after) q.set('after', after);
  return q.toString();
}

// refreshSearch reads the page of tags found, or shows why it cannot.
async function refreshSearch() {
  if (!search.on) return;
  const seq = ++search.seq;
  const box = $('#search');
  try {
    const s = await getJSON('v2/status?detail=1&' + pageQuery(search.prefix, search.after, SEARCH_LIMIT));
    if (seq !== search.seq) return;
    const tags = s.segment.tags;
    if (s.detail === false) throw new Error('shown with the admin token');
    searchTable.render(tags);
    search.next = s.segment.next || null;
    $('#search-table').hidden = tags.length === 0;
    $('#search-note').textContent = tags.length === 0
      ? `No tag held by this server begins with “${search.prefix}”.`
      : `Tags held by this server beginning with “${search.prefix}”${search.after ? `, after ${search.after}` : ''}:`;
    $('#search-error').hidden = true;
    box.dataset.state = 'ok';
  } catch (e) {
    if (seq !== search.seq) return;
    search.next = null;
    searchTable.render([]);
    $('#search-table').hidden = true;
    $('#search-error').textContent = `Cannot search: ${e.message}`;
    $('#search-error').hidden = false;
    box.dataset.state = 'error';
  }
  $('#search-next').hidden = !search.next;
  $('#search-first').hidden = !search.after;
  $('#search-pager').hidden = !search.next && !search.after;
}

// refreshRows reads a page of the store's rows, or shows why it cannot in
// their section.
async function refreshRows() {
  const seq = ++rowsPage.seq;
  const section = $('#db');
  try {
    const {tags, next} = await getJSON('v2/tags?' + pageQuery(search.prefix, rowsPage.after, ROWS_LIMIT));
    if (seq !== rowsPage.seq) return;
    const rows = tags.map((a) => {
      const row = $('#db-row').content.firstElementChild.cloneNode(true);
      row.dataset.tag = a.tag;
      set(row, 'tag', a.tag);
      set(row, 'max_id', String(a.max_id));
      set(row, 'step', count(a.step));
      set(row, 'description', a.description);
      set(row, 'update_time', when(a.update_time), isSet(a.update_time) ? a.update_time : '');
      return row;
    });
    $('#db-body').replaceChildren(...rows);
    rowsPage.next = next || null;
    const what = search.prefix ? `Rows whose tag begins with “${search.prefix}”` : 'Rows';
    $('#db-note').textContent = tags.length === 0
      ? `${what}: none${rowsPage.after ? ' after ' + rowsPage.after : ''}.`
      : `${what}${rowsPage.after ? ' after ' + rowsPage.after : ''}, ${ROWS_LIMIT} a page:`;
    section.dataset.state = 'ok';
    $('#db-error').hidden = true;
    $('#db-table').hidden = false;
  } catch (e) {
    if (seq !== rowsPage.seq) return;
    rowsPage.next = null;
    section.dataset.state = 'error';
    $('#db-error').textContent = `Cannot read the rows: ${e.message}`;
    $('#db-error').hidden = false;
    $('#db-table').hidden = true;
    $('#db-note').textContent = '';
  }
  $('#db-next').hidden = !rowsPage.next;
  $('#db-first').hidden = !rowsPage.after;
  $('#db-pager').hidden = !rowsPage.next && !rowsPage.after;
}

// Each handler below starts its reads at once rather than at the next tick.

function doSearch(ev) {
  ev.preventDefault();
  search.prefix = $('#search-input').value.trim();
  search.on = search.prefix !== '';
  search.after = rowsPage.after = '';
  if (!search.on) {
    searchTable.render([]);
    $('#search-table').hidden = true;
    $('#search-pager').hidden = true;
    $('#search-error').hidden = true;
    $('#search-note').textContent = 'Tags this server holds, and the store\'s rows below, by name prefix.';
  }
  refreshSearch();
  refreshRows();
}

function searchPage(after) {
  search.after = after;
  refreshSearch();
}

function rowsPageAt(after) {
  rowsPage.after = after;
  refreshRows();
}

// ---- snowflake worker

function renderSnowflake(w) {
  $('#snowflake-off').hidden = Boolean(w);
  const box = $('#snowflake-fields');
  box.hidden = !w;
  if (!w) return;
  set(box, 'worker_id', w.worker_id < 0 ? 'none (lost, re-registering)' : String(w.worker_id));
  set(box, 'registry', w.registry);
  set(box, 'endpoint', w.endpoint);
  set(box, 'layout', w.layout);
  set(box, 'from_cache', w.from_cache ? 'yes (registry unreachable at start-up)' : 'no');
  const lead = (w.high_water_ms - Date.now()) / 1000;
  set(box, 'high_water', `${lead >= 0 ? '+' : '−'}${Math.abs(lead).toFixed(1)} s`, new Date(w.high_water_ms).toISOString())
    .dataset.level = lead < 0 ? 'bad' : '';
  set(box, 'lease_expires', w.lease_expires ? when(w.lease_expires) : 'no lease', w.lease_expires || '')
    .dataset.level = w.lease_expires && Date.parse(w.lease_expires) < Date.now() ? 'bad' : '';
  const hb = set(box, 'last_heartbeat', when(w.last_heartbeat), w.last_heartbeat || '');
  if (w.heartbeat_error) hb.textContent += ` — failing: ${w.heartbeat_error}`;
  hb.dataset.level = w.heartbeat_error ? 'bad' : '';
  set(box, 'heartbeat_failures', count(w.heartbeat_failures)).dataset.level = w.heartbeat_failures > 0 ? 'warn' : '';
  set(box, 'rollbacks', `${count(w.rollbacks)} (largest ${count(w.max_rollback_ms)} ms)`);
  set(box, 'issued', count(w.issued));
  set(box, 'ids_per_sec', rate(w.ids_per_sec));
}

// ---- decode box

let decodeSeq = 0; // only the latest request's answer is shown

async function decode(ev) {
  ev.preventDefault();
  const seq = ++decodeSeq;
  const box = $('#decode');
  const id = $('#decode-input').value.trim();
  box.dataset.state = 'busy';
  let d = null;
  let err = null;
  try {
    if (id === '') throw new Error('enter a snowflake ID');
    d = await getJSON('v2/snowflake/decode/' + encodeURIComponent(id));
  } catch (e) {
    err = e;
  }
  if (seq !== decodeSeq) return;
  const result = $('#decode-result');
  if (d) {
    set(result, 'id', d.id_str);
    set(result, 'time', d.time);
    set(result, 'timestamp_ms', String(d.timestamp_ms));
    set(result, 'worker_id', String(d.worker_id));
    set(result, 'sequence', String(d.sequence));
  } else {
    $('#decode-error').textContent = err.message;
  }
  result.hidden = !d;
  $('#decode-error').hidden = Boolean(d);
  box.dataset.state = d ? 'ok' : 'error';
}

// ---- charts of the last 10 minutes

const WINDOW_MS = 10 * 60 * 1000;
const SVG_NS = 'http://www.w3.org/2000/svg';
// The charts' viewBox and the plot area's margins inside it.
const CW = 360, CH = 140, PAD_L = 44, PAD_R = 8, PAD_T = 8, PAD_B = 18;
const MIN_SPAN_MS = 60 * 1000; // the narrowest time axis, for a young server
const DRY_CAP = 600; // seconds: beyond 10 min a buffer is not a worry

// hist holds the samples read so far, one array per series, all aligned
// with t (the samples' times, Unix ms); null is no value. next is the
// sample to ask from; seq numbers the reads, as for the search.
const hist = {on: true, seq: 0, next: 0, t: [], modes: {}, tags: new Map()};
const SCALARS = {
  seg: (h) => h.segment?.ids_per_sec,
  snow: (h) => h.snowflake?.ids_per_sec,
  lead: (h) => h.snowflake?.lead_s,
  p50: (h) => h.latency?.p50_ms,
  p99: (h) => h.latency?.p99_ms,
};

// resetHistory forgets the samples held: the next read asks for them all.
function resetHistory() {
  hist.next = 0;
  hist.t = [];
  for (const k of Object.keys(SCALARS)) hist[k] = [];
  hist.tags = new Map();
}
resetHistory();

// mergeHistory appends an answer's samples, or starts afresh when they do
// not follow those held (the first read, a gap, another server), and keeps
// the last 10 minutes.
function mergeHistory(h) {
  if (h.first !== hist.next) resetHistory();
  const held = hist.t.length;
  const n = h.time_ms.length;
  const nulls = (k) => new Array(k).fill(null);
  hist.t.push(...h.time_ms);
  for (const [k, get] of Object.entries(SCALARS)) hist[k].push(...(get(h) || nulls(n)));
  // The tags in the server's order, which keeps each in its place (and
  // colour) while it has series; a tag no longer listed is gone.
  const tags = new Map();
  for (const s of h.tags || []) {
    const old = hist.tags.get(s.tag) || {ids: nulls(held), remaining: nulls(held), left: nulls(held)};
    old.ids.push(...s.ids_per_sec);
    old.remaining.push(...s.remaining);
    old.left.push(...s.seconds_left);
    tags.set(s.tag, old);
  }
  hist.tags = tags;
  hist.next = h.next;
  hist.modes = {segment: Boolean(h.segment), snowflake: Boolean(h.snowflake), latency: Boolean(h.latency)};
  const end = hist.t[hist.t.length - 1];
  const drop = hist.t.findIndex((t) => t > end - WINDOW_MS);
  if (drop > 0) {
    hist.t.splice(0, drop);
    for (const k of Object.keys(SCALARS)) hist[k].splice(0, drop);
    for (const s of hist.tags.values()) for (const a of Object.values(s)) a.splice(0, drop);
  }
}

// refreshHistory reads the samples taken since the last read and draws
// them; a server that keeps none (404) is not asked again.
async function refreshHistory() {
  if (!hist.on) return;
  const seq = ++hist.seq;
  const section = $('#charts');
  const note = $('#charts-note');
  try {
    const h = await getJSON(`v2/status/history?since=${hist.next}`);
    if (seq !== hist.seq) return;
    section.hidden = false;
    const hidden = h.detail === false;
    $('#chart-grid').hidden = hidden;
    note.hidden = !hidden;
    note.textContent = 'Shown with the admin token.';
    if (hidden) {
      resetHistory();
      return;
    }
    mergeHistory(h);
    renderCharts();
  } catch (e) {
    if (seq !== hist.seq) return;
    if (e.status === 404) {
      hist.on = false;
      section.hidden = true;
      return;
    }
    note.textContent = `Cannot read the history: ${e.message}`;
    note.hidden = false;
  }
}

function svg(name, attrs, text) {
  const el = document.createElementNS(SVG_NS, name);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

// nice rounds a positive axis bound up to 1, 2, 2.5 or 5 times a power of ten.
function nice(v) {
  const mag = 10 ** Math.floor(Math.log10(v));
  return [1, 2, 2.5, 5, 10].find((m) => m * mag >= v * (1 - 1e-9)) * mag;
}

const compact = new Intl.NumberFormat('en-US', {notation: 'compact', maximumFractionDigits: 1});
const short = (v) => (Math.abs(v) >= 1000 ? compact.format(v) : Number(v.toPrecision(3)).toString());
const ms = (v) => (v === 0 ? '0' : `${v < 10 ? v.toFixed(2) : Math.round(v)} ms`);
const ago = (t) => (t === 0 ? 'now' : t % 60000 === 0 ? `−${t / 60000} min` : `−${t / 1000} s`);
const signed = (v) => (v === 0 ? '0' : `${v > 0 ? '+' : '−'}${Math.abs(v).toFixed(1)} s`);

// pathData draws values against the times ts as one path, broken where a
// value is missing; a point alone is a dot.
function pathData(ts, values, x, y) {
  let d = '';
  let run = 0;
  values.forEach((v, i) => {
    if (v === null || v === undefined) {
      if (run === 1) d += 'h0.5';
      run = 0;
      return;
    }
    d += `${run ? 'L' : 'M'}${x(ts[i]).toFixed(1)} ${y(v).toFixed(1)}`;
    run++;
  });
  if (run === 1) d += 'h0.5';
  return d;
}

// drawChart draws lines ({name, values, cls}) into the figure
// [data-chart=id], values clamped to cap, and lists them with their last
// value written by fmt. The time axis spans the samples held, in whole
// minutes: the last 10 minutes once the server has run that long.
function drawChart(id, lines, fmt, cap = Infinity) {
  const fig = $(`[data-chart="${id}"]`);
  fig.hidden = false;
  const ts = hist.t;
  const end = ts.length ? ts[ts.length - 1] : Date.now();
  const held = ts.length ? end - ts[0] : 0;
  const span = Math.min(WINDOW_MS, Math.max(MIN_SPAN_MS, Math.ceil(held / 60000) * 60000));
  const start = end - span;
  const clamp = (v) => (v === null ? null : Math.min(v, cap));
  lines = lines.map((l) => ({...l, values: l.values.map(clamp)}));
  let lo = 0;
  let hi = 0;
  for (const l of lines) {
    for (const v of l.values) {
      if (v !== null) {
        lo = Math.min(lo, v);
        hi = Math.max(hi, v);
      }
    }
  }
  // A little headroom, so that a steady line does not run along the top.
  hi = hi > 0 ? Math.min(nice(hi * 1.05), cap) : lo < 0 ? 0 : 1;
  lo = lo < 0 ? -nice(-lo * 1.05) : 0;
  const x = (t) => PAD_L + ((t - start) / span) * (CW - PAD_L - PAD_R);
  const y = (v) => PAD_T + ((hi - v) / (hi - lo)) * (CH - PAD_T - PAD_B);
  const nodes = [];
  for (const v of lo < 0 ? [lo, 0, hi] : [0, hi / 2, hi]) {
    nodes.push(svg('line', {class: v === 0 && lo < 0 ? 'zero' : 'grid', x1: PAD_L, x2: CW - PAD_R, y1: y(v), y2: y(v)}));
    nodes.push(svg('text', {x: PAD_L - 4, y: y(v) + 3, 'text-anchor': 'end'}, fmt(v, true)));
  }
  const bottom = CH - PAD_B + 12;
  nodes.push(svg('text', {x: PAD_L, y: bottom}, ago(span)));
  nodes.push(svg('text', {x: (PAD_L + CW - PAD_R) / 2, y: bottom, 'text-anchor': 'middle'}, ago(span / 2)));
  nodes.push(svg('text', {x: CW - PAD_R, y: bottom, 'text-anchor': 'end'}, ago(0)));
  const shown = lines.filter((l) => l.values.some((v) => v !== null));
  for (const l of shown) {
    const path = svg('path', {class: `line ${l.cls}`, d: pathData(ts, l.values, x, y), 'data-series': l.name});
    path.append(svg('title', {}, l.name));
    nodes.push(path);
  }
  if (shown.length === 0) {
    nodes.push(svg('text', {class: 'empty', x: (PAD_L + CW - PAD_R) / 2, y: (PAD_T + CH - PAD_B) / 2, 'text-anchor': 'middle'}, 'no data yet'));
  }
  fig.querySelector('svg').replaceChildren(...nodes);
  fig.querySelector('.legend').replaceChildren(...shown.map((l) => {
    const li = document.createElement('li');
    const sw = document.createElement('span');
    sw.className = `sw ${l.cls}`;
    const name = document.createElement('span');
    name.className = l.tag ? 'tag' : '';
    name.textContent = l.name;
    const last = l.values.findLast((v) => v !== null);
    li.append(sw, name, ` ${last === undefined ? '–' : fmt(last)}`);
    li.dataset.series = l.name;
    return li;
  }));
}

function renderCharts() {
  const m = hist.modes;
  const fig = (id) => $(`[data-chart="${id}"]`);
  const modes = [];
  if (m.segment) modes.push({name: 'segment', values: hist.seg, cls: 'c0'});
  if (m.snowflake) modes.push({name: 'snowflake', values: hist.snow, cls: 'c1'});
  drawChart('ids', modes, (v) => short(v));
  if (m.latency) {
    drawChart('latency', [{name: 'p50', values: hist.p50, cls: 'c0'}, {name: 'p99', values: hist.p99, cls: 'c2'}], ms);
  } else {
    fig('latency').hidden = true;
  }
  for (const id of ['tag-ids', 'remaining', 'until-dry']) fig(id).hidden = !m.segment;
  if (m.segment) {
    const tags = [...hist.tags].map(([tag, s], i) => ({tag, s, cls: `c${i % 10}`}));
    const lines = (key) => tags.map(({tag, s, cls}) => ({name: tag, values: s[key], cls, tag: true}));
    drawChart('tag-ids', lines('ids'), (v) => short(v));
    drawChart('remaining', lines('remaining'), (v) => short(v));
    drawChart('until-dry', lines('left'), (v, axis) => (axis && v >= DRY_CAP ? '10 min' : axis && v === 0 ? '0' : duration(v)), DRY_CAP);
  }
  if (m.snowflake) {
    drawChart('lead', [{name: 'lead', values: hist.lead, cls: 'c4'}], signed);
  } else {
    fig('lead').hidden = true;
  }
}

// ---- refresh loop

let ticks = 0;
let rowsKey = null; // what the rows were last read for, see refresh

// askToken shows the token form, with why the last token failed if it did.
function askToken(why) {
  $('#token-form').hidden = false;
  $('#token-error').textContent = why || '';
  $('#token-error').hidden = !why;
}

function useToken(ev) {
  ev.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, $('#token-input').value.trim());
  $('#token-input').value = '';
  rowsKey = null; // read the rows again, now with the token
  refresh();
}

async function refresh() {
  const [status] = await Promise.allSettled([getJSON(`v2/status/summary?top=${TOP}`), refreshSearch(), refreshHistory()]);
  if (status.status === 'rejected' && status.reason.status === 401) {
    // A wrong token: forget it, so the summary shows again, and ask anew.
    sessionStorage.removeItem(TOKEN_KEY);
    askToken(status.reason.message);
    return refresh();
  }
  if (status.status === 'rejected') {
    document.body.classList.add('stale');
    renderState('down', 'unreachable', [status.reason.message]);
    return;
  }
  const s = status.value;
  document.body.classList.remove('stale');
  const hidden = s.detail === false;
  if (hidden) {
    askToken($('#token-error').textContent);
  } else {
    $('#token-form').hidden = true;
  }
  $('#tags-empty').textContent = hidden ? 'Shown with the admin token.' : 'No IDs issued yet.';
  $('#snowflake-off').textContent = hidden ? 'Shown with the admin token.' : 'Snowflake mode is disabled.';
  $('#version').textContent = s.version || '–';
  $('#updated').textContent = `updated ${new Date().toLocaleTimeString()}`;
  const why = s.degraded;
  renderState(why.length ? 'degraded' : 'ok', why.length ? 'degraded' : 'ok', why, s.degraded_count);
  renderSegment(s.segment, hidden);
  renderSnowflake(s.snowflake);
  // The rows change when a range is reserved (or a tag is added or
  // removed): read them when a tag shown loads a range, and every
  // ROWS_EVERY refreshes for the rest.
  const shown = hidden || !s.segment.enabled ? [] : [...s.segment.top, ...s.segment.degraded_tags];
  const key = shown.map((t) => `${t.tag}:${t.loads}`).join(' ');
  if (key !== rowsKey || ticks % ROWS_EVERY === 0) {
    rowsKey = key;
    await refreshRows(); // a failure is shown in the section
  }
}

async function loop() {
  const started = performance.now();
  if (!document.hidden) {
    ticks++;
    await refresh();
  }
  setTimeout(loop, Math.max(0, REFRESH_MS - (performance.now() - started)));
}

$('#decode-form').addEventListener('submit', decode);
$('#token-form').addEventListener('submit', useToken);
$('#search-form').addEventListener('submit', doSearch);
$('#search-next').addEventListener('click', () => searchPage(search.next));
$('#search-first').addEventListener('click', () => searchPage(''));
$('#db-next').addEventListener('click', () => rowsPageAt(rowsPage.next));
$('#db-first').addEventListener('click', () => rowsPageAt(''));
loop();
