// leaf monitor: reads ../v2/status (and ../readyz) every second, the store's
// rows from ../v2/tags when they may have changed, and renders them. Data only
// ever enters the page through textContent, never as markup. URLs are
// relative to the page (…/monitor/), so it also works behind a path prefix.
'use strict';

const REFRESH_MS = 1000;
const ROWS_EVERY = 10; // refreshes between reads of the store's rows, at most
const TIMEOUT_MS = 5000;

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

// getReasons reads /readyz: [] when ready, else the degraded reasons.
async function getReasons() {
  const resp = await fetch('../readyz', {cache: 'no-store', signal: AbortSignal.timeout(TIMEOUT_MS)});
  const lines = (await resp.text()).split('\n').filter((l) => l !== '');
  if (lines[0] === 'ok') return [];
  if (lines[0] === 'degraded') return lines.slice(1);
  throw new Error(`/readyz: ${resp.status}`);
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

function renderState(state, text, reasons) {
  const badge = $('#state');
  badge.dataset.state = state;
  badge.textContent = text;
  const list = $('#reasons');
  list.replaceChildren(...reasons.map((r) => {
    const li = document.createElement('li');
    li.textContent = r;
    return li;
  }));
  list.hidden = reasons.length === 0;
}

// ---- segment buffers

const tagRows = new Map(); // tag -> <tr>, kept across refreshes

function renderSegment(seg) {
  $('#segment-off').hidden = seg.enabled;
  $('#tags').hidden = !seg.enabled;
  $('#tags-empty').hidden = !seg.enabled || seg.tags.length > 0;
  const body = $('#tags-body');
  const seen = new Set();
  seg.tags.forEach((t, i) => {
    seen.add(t.tag);
    let row = tagRows.get(t.tag);
    if (!row) {
      row = $('#tag-row').content.firstElementChild.cloneNode(true);
      row.dataset.tag = t.tag;
      tagRows.set(t.tag, row);
    }
    if (body.children[i] !== row) body.insertBefore(row, body.children[i] || null);
    renderTag(row, t);
  });
  for (const [tag, row] of tagRows) {
    if (!seen.has(tag)) {
      row.remove();
      tagRows.delete(tag);
    }
  }
}

function renderTag(row, t) {
  set(row, 'tag', t.tag);
  set(row, 'state', !t.init_ok ? 'not loaded' : t.loading ? 'loading' : '');
  set(row, 'load_error', t.load_error || '');
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

// ---- database rows

let rowsKey = null; // what the rows were last read for, see refresh

// refreshRows reads the rows, or shows why it cannot in their section.
async function refreshRows() {
  const section = $('#db');
  try {
    const {tags} = await getJSON('v2/tags');
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
    section.dataset.state = 'ok';
    $('#db-error').hidden = true;
    $('#db-table').hidden = false;
  } catch (e) {
    section.dataset.state = 'error';
    $('#db-error').textContent = `Cannot read the rows: ${e.message}`;
    $('#db-error').hidden = false;
    $('#db-table').hidden = true;
  }
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
  const [status, reasons] = await Promise.allSettled([getJSON('v2/status'), getReasons()]);
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
  $('#tags-empty').textContent = hidden ? 'Shown with the admin token.' : 'No tags yet.';
  $('#snowflake-off').textContent = hidden ? 'Shown with the admin token.' : 'Snowflake mode is disabled.';
  $('#version').textContent = s.version || '–';
  $('#updated').textContent = `updated ${new Date().toLocaleTimeString()}`;
  const why = reasons.status === 'fulfilled' ? reasons.value : s.segment.degraded;
  renderState(why.length ? 'degraded' : 'ok', why.length ? 'degraded' : 'ok', why);
  renderSegment(s.segment);
  renderSnowflake(s.snowflake);
  // The rows change when a range is reserved (or a tag is added or
  // removed): read them then, and every ROWS_EVERY refreshes for the rest.
  const key = s.segment.tags.map((t) => `${t.tag}:${t.loads}`).join(' ');
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
loop();
