// leaf monitor: reads ../v2/status/summary every second (a bounded view:
// the busiest tags, the degraded ones, totals and the worker, whatever the
// number of tags), a page of the tags found by name when a search is on,
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
  if (!detail) return;
  const totals = $('#totals');
  set(totals, 'tags_known', count(seg.tags_known));
  set(totals, 'tags_in_use', count(seg.tags_in_use));
  set(totals, 'ids_per_sec', rate(seg.ids_per_sec));
  set(totals, 'issued', count(seg.issued));
  set(totals, 'store', seg.store_ok ? 'ok' : 'unreachable').dataset.level = seg.store_ok ? '' : 'bad';
}

function renderTag(row, t) {
  set(row, 'tag', t.tag);
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
  const [status] = await Promise.allSettled([getJSON(`v2/status/summary?top=${TOP}`), refreshSearch()]);
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
