// The specsweep dashboard: reads the daemon's API with its session's secret in a header, follows
// /api/events (through the tabs' shared worker, static/events.js), and builds every element with
// textContent (a sweep name or a log line is never read as HTML).
//
// The session (docs/security.md, "The dashboard's sessions"): a login URL is /#code=CODE; the
// fragment never goes to a server. The page trades the code for a secret (POST /api/sessions) and
// keeps it in localStorage: that is per origin, port included, so a server on another port of this
// host cannot read it, and every tab of the dashboard shares it (sessionStorage is per tab, and the
// eight tabs of one browser would each need a login URL). The secret dies with its session in the
// daemon (logout, `specsweep dashboard --revoke`, expiry, a restart), so one left in the browser's
// profile after that opens nothing. No cookie is set or read.
"use strict";

const HEADER = "X-Specsweep-Session";
const KEY = "specsweep.session";
const state = { sweeps: [], detail: {}, results: {}, logs: {}, opened: null };
let secret = localStorage.getItem(KEY);
let worker = null;

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else e.setAttribute(k, v);
  }
  for (const k of kids) if (k != null) e.append(k);
  return e;
}

function showLive(text, on) {
  const live = document.getElementById("live");
  live.textContent = text;
  live.className = "live " + (on ? "on" : "off");
}

// loggedOut forgets a secret the daemon no longer knows (only that one: another tab may have
// logged in since).
function loggedOut(dead) {
  if (!dead || localStorage.getItem(KEY) === dead) localStorage.removeItem(KEY);
  if (!dead || secret === dead) secret = null;
  document.getElementById("logout").hidden = true;
  showLive("logged out: open a new login URL from `specsweep dashboard`", false);
}

// send is fetch with the session's header and no cookie.
async function send(path, opts) {
  if (!secret) throw new Error("not logged in");
  const o = Object.assign({ credentials: "omit", cache: "no-store" }, opts || {});
  o.headers = Object.assign({ [HEADER]: secret }, o.headers || {});
  const used = secret;
  const r = await fetch(path, o);
  if (r.status === 401 || r.status === 403) {
    let msg = "";
    try { msg = (await r.clone().json()).error || ""; } catch (e) { /* not JSON */ }
    if (/session/.test(msg)) loggedOut(used);
  }
  return r;
}

async function api(path, opts) {
  const r = await send(path, opts);
  if (!r.ok) throw new Error(path + ": " + r.status);
  return r.json();
}

// postJSON sends a JSON body (a type no other origin may send without asking first).
function postJSON(path, body) {
  return send(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
}

// navigate opens a report or export: a link cannot carry the header, so the page asks for a ticket
// that opens that one path once, within a minute. A report opens in a new tab, made before the
// request so that no popup blocker stands in the way.
async function navigate(ev, path, newTab) {
  ev.preventDefault();
  ev.stopPropagation();
  const w = newTab ? window.open("", "_blank") : null;
  try {
    const r = await postJSON("/api/tickets", { path: path });
    if (!r.ok) throw new Error(path + ": " + r.status);
    const url = (await r.json()).url;
    if (w) { w.opener = null; w.location.replace(url); } else window.location.assign(url);
  } catch (e) {
    if (w) w.close();
    window.alert("opening " + path + " failed: " + e.message);
  }
}

function ticketLink(a, path, newTab) {
  a.href = path;
  a.onclick = ev => navigate(ev, path, newTab);
}

function ago(ms) {
  if (!ms) return "";
  return dur((Date.now() - ms) / 1000);
}
function dur(s) {
  s = Math.max(0, Math.round(s));
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), x = s % 60;
  if (h) return h + "h" + String(m).padStart(2, "0") + "m";
  if (m) return m + "m" + String(x).padStart(2, "0") + "s";
  return x + "s";
}
// orphanText says that no process holds a running sweep any more, since when, and how to resume it.
function orphanText(s) {
  const h = s.holder || {};
  const how = h.kind === "daemon"
    ? "start the daemon again (it resumes the sweeps it was running)"
    : "run the same `specsweep run` command again to resume it";
  return "Interrupted: no process has held it since " + when(s.orphaned_since) +
    (h.pid ? " (" + (h.kind === "daemon" ? "daemon" : "specsweep run") + ", pid " + h.pid + (h.host ? " on " + h.host : "") + ")" : "") +
    "; " + how + ".";
}

function when(ms) {
  if (!ms) return "";
  const d = new Date(ms);
  return d.toISOString().replace("T", " ").slice(0, 16) + " UTC";
}

// Debounced refreshes, one per key.
const timers = {};
function soon(key, fn, ms) {
  if (timers[key]) return;
  timers[key] = setTimeout(() => { delete timers[key]; fn().catch(err => console.warn(key, err)); }, ms || 250);
}

async function refreshAll() {
  await refreshList();
  const ids = state.sweeps.filter(s => s.state === "running").map(s => s.id);
  if (state.opened) ids.push(state.opened);
  await Promise.all(ids.map(id => Promise.all([refreshDetail(id), refreshResults(id)])));
}

// refreshList reads every sweep: the API answers pages (docs/daemon.md), so it follows each page's
// rel="next" link to the last.
async function refreshList() {
  const all = [];
  let path = "/api/sweeps?limit=1000";
  for (let pages = 0; path && pages < 10000; pages++) {
    const r = await send(path);
    if (!r.ok) throw new Error(path + ": " + r.status);
    for (const s of await r.json()) all.push(s);
    const next = /<([^>]+)>;\s*rel="next"/.exec(r.headers.get("Link") || "");
    path = next ? next[1] : "";
  }
  state.sweeps = all;
  renderLists();
  renderRunning();
}

async function refreshDetail(id) {
  state.detail[id] = await api("/api/sweeps/" + id);
  renderCard(id);
}

async function refreshResults(id) {
  state.results[id] = await api("/api/sweeps/" + id + "/results");
  renderCard(id);
}

function renderLists() {
  const counts = {};
  for (const s of state.sweeps) counts[s.state] = (counts[s.state] || 0) + 1;
  document.getElementById("counts").textContent =
    Object.entries(counts).map(([k, v]) => v + " " + k).join(", ") || "no sweeps";
  const q = document.querySelector("#queue tbody");
  q.replaceChildren();
  for (const s of state.sweeps.filter(s => s.state === "queued" || s.state === "scheduled")) {
    const next = s.state === "scheduled" ? (s.next_fire ? when(s.next_fire) + " (" + s.schedule + ")" : s.schedule)
      : (s.not_before ? "not before " + when(s.not_before) : "when its hosts are free");
    q.append(el("tr", { "data-sweep": s.id }, el("td", { text: s.id }), el("td", { text: s.name }),
      el("td", {}, el("span", { class: "badge " + s.state, text: s.state })), el("td", { text: next }),
      el("td", { class: "num", text: s.points }), el("td", {}, actionButton(s, "cancel"))));
  }
  if (!q.children.length) q.append(el("tr", {}, el("td", { colspan: 6, class: "muted", text: "Nothing queued." })));
  const f = document.querySelector("#finished tbody");
  f.replaceChildren();
  for (const s of state.sweeps.filter(s => !["queued", "scheduled", "running"].includes(s.state))) {
    const tr = el("tr", { class: "clickable", "data-sweep": s.id }, el("td", { text: s.id }), el("td", { text: s.name }),
      el("td", {}, el("span", { class: "badge " + s.state, text: s.state })), el("td", { class: "num", text: s.done }),
      el("td", { class: "num", text: s.failed }), el("td", { class: "num", text: s.pruned }),
      el("td", { text: when(s.finished_at) }), el("td", {}, reportLink(s.id)));
    tr.addEventListener("click", ev => {
      if (ev.target.tagName === "A") return;
      state.opened = state.opened === s.id ? null : s.id;
      renderOpened();
      if (state.opened) Promise.all([refreshDetail(s.id), refreshResults(s.id)]).catch(console.warn);
    });
    f.append(tr);
  }
  if (!f.children.length) f.append(el("tr", {}, el("td", { colspan: 8, class: "muted", text: "None yet." })));
}

function reportLink(id) {
  const a = el("a", { text: "report" });
  ticketLink(a, "/sweeps/" + id + "/report", true);
  return a;
}

function actionButton(s, what) {
  const b = el("button", { type: "button", class: what, text: what });
  b.addEventListener("click", ev => { ev.stopPropagation(); act(s, what); });
  return b;
}

async function act(s, what) {
  const q = what === "cancel"
    ? "Cancel sweep " + s.name + " (" + s.id + ")? Pending points are cancelled; running ones stop and their hosts are restored."
    : "Resume sweep " + s.name + " (" + s.id + ")? It goes back in the queue.";
  if (!window.confirm(q)) return;
  const r = await send("/api/sweeps/" + s.id + "/" + what, { method: "POST" });
  if (!r.ok) {
    let msg = r.status;
    try { msg = (await r.json()).error; } catch (e) { /* not JSON */ }
    window.alert(what + " failed: " + msg);
  }
  await refreshAll();
}

function renderRunning() {
  const box = document.getElementById("running");
  const running = state.sweeps.filter(s => s.state === "running");
  for (const c of [...box.querySelectorAll("article.sweep")]) {
    if (!running.some(s => String(s.id) === c.dataset.sweep)) c.remove();
  }
  box.querySelector("p.muted")?.remove();
  for (const s of running) {
    if (!box.querySelector('article[data-sweep="' + s.id + '"]')) box.append(newCard(s.id));
    renderCard(s.id);
  }
  if (!running.length) box.replaceChildren(el("p", { class: "muted", text: "No sweep is running." }));
}

function renderOpened() {
  const box = document.getElementById("opened");
  box.replaceChildren();
  if (state.opened) { box.append(newCard(state.opened)); renderCard(state.opened); }
}

function newCard(id) {
  const c = document.getElementById("card").content.firstElementChild.cloneNode(true);
  c.dataset.sweep = id;
  c.querySelector(".cancel").addEventListener("click", () => act(summary(id), "cancel"));
  c.querySelector(".resume").addEventListener("click", () => act(summary(id), "resume"));
  return c;
}

function summary(id) {
  return state.detail[id] || state.sweeps.find(s => s.id === id) || { id: id, name: "" };
}

function renderCard(id) {
  for (const c of document.querySelectorAll('article.sweep[data-sweep="' + id + '"]')) fillCard(c, id);
}

function fillCard(c, id) {
  const s = Object.assign({}, state.sweeps.find(x => x.id === id) || {}, state.detail[id] || {});
  c.querySelector(".name").textContent = s.name || "";
  c.querySelector(".sid").textContent = "#" + id;
  // A running sweep whose process died is interrupted in all but the store's word (api: orphaned_since).
  const shown = s.orphaned_since ? "interrupted" : (s.state || "");
  const badge = c.querySelector(".state");
  badge.textContent = shown;
  badge.className = "badge state " + shown;
  ticketLink(c.querySelector(".report"), "/sweeps/" + id + "/report", true);
  ticketLink(c.querySelector(".export"), "/sweeps/" + id + "/export", false);
  c.querySelector(".cancel").hidden = !["running", "queued", "scheduled"].includes(s.state);
  c.querySelector(".resume").hidden = !["cancelled", "interrupted", "failed"].includes(s.state);
  const n = Math.max(1, s.points || 0);
  for (const k of ["done", "failed", "pruned", "running"]) c.querySelector(".p-" + k).style.width = (100 * (s[k] || 0) / n) + "%";
  const facts = [(s.done || 0) + " done", (s.failed || 0) + " failed", (s.pruned || 0) + " pruned",
    (s.running || 0) + " running", (s.pending || 0) + " pending"];
  if (s.waiting) facts.push(s.waiting + " waiting for the search");
  facts.push("of " + (s.points || 0) + " points");
  if (s.started_at) facts.push("elapsed " + (s.finished_at ? dur((s.finished_at - s.started_at) / 1000) : ago(s.started_at)));
  if (s.state === "running" && s.eta_s) facts.push("ETA " + dur(s.eta_s));
  c.querySelector(".facts").textContent = facts.join(" · ");
  c.querySelector(".orphan").hidden = !s.orphaned_since;
  if (s.orphaned_since) c.querySelector(".orphan").textContent = orphanText(s);
  fillHosts(c, s);
  const res = state.results[id];
  if (res) {
    fillTable(c.querySelector(".best"), res.best, c.querySelector(".best-note"));
    fillTable(c.querySelector(".results"), res.results, c.querySelector(".results-note"));
  }
  fillFailures(c, s);
  fillLog(c, id);
}

function fillHosts(c, s) {
  const tb = c.querySelector("table.hosts tbody");
  tb.replaceChildren();
  const acts = Object.entries(s.activity || {}).sort(([a], [b]) => a.localeCompare(b, undefined, { numeric: true }));
  for (const [key, a] of acts) {
    const down = a.phase === "retry" || (a.phase === "failed" && !a.point);
    const level = a.phase === "load" && /concurrency (\d+)/.exec(a.detail || "");
    const phase = down ? a.phase + " (host down?)" : level ? "level c=" + level[1] : a.phase;
    const tr = el("tr", { class: down ? "down" : "", "data-host": key },
      el("td", { text: key }), el("td", { text: (a.gpus || []).join(",") }),
      el("td", { text: phase }), el("td", { text: a.label || "" }),
      el("td", { class: "wrap", text: a.detail || "" }), el("td", { text: ago(a.at) }));
    tb.append(tr);
  }
  if (!acts.length) tb.append(el("tr", {}, el("td", { colspan: 6, class: "muted", text: s.state === "running" ? "Starting." : "Not running." })));
}

function fillTable(box, t, note) {
  box.replaceChildren();
  if (note) note.textContent = (t && t.note) || "";
  if (!t || !t.rows || !t.rows.length) { box.append(el("p", { class: "muted", text: "No runs yet." })); return; }
  const old = box.dataset.rows ? new Set(JSON.parse(box.dataset.rows)) : null;
  const table = el("table", {}, el("thead", {}, el("tr", {}, ...t.head.map(h => el("th", { text: h })))));
  const tb = el("tbody");
  const keys = [];
  for (const row of t.rows) {
    const key = row.slice(0, 3).join("|");
    keys.push(key);
    const tr = el("tr", { class: old && !old.has(key) ? "fresh" : "" },
      ...row.map((v, i) => el("td", { class: (t.num && t.num[i] ? "num" : "") + (t.code && t.code[i] ? " code" : ""), text: v })));
    tb.append(tr);
  }
  table.append(tb);
  box.append(table);
  box.dataset.rows = JSON.stringify(keys);
}

function fillFailures(c, s) {
  const box = c.querySelector(".failures");
  box.replaceChildren();
  const failed = (s.point_list || []).filter(p => p.state === "failed");
  for (const p of failed) {
    const lines = (p.failure_detail || "").split("\n");
    box.append(el("div", { class: "failure" },
      el("span", { class: "cls", text: p.failure_class || "failed" }), " ",
      el("span", { text: [p.method, p.num_steps != null ? "s=" + p.num_steps : null, "tp=" + p.tp].filter(Boolean).join(" ") + (p.host ? " on " + p.host : "") }),
      el("pre", { text: lines.slice(0, 4).join("\n") })));
  }
  if (!failed.length) box.append(el("p", { class: "muted", text: "None." }));
}

function fillLog(c, id) {
  const ul = c.querySelector("ul.log");
  ul.replaceChildren();
  for (const e of (state.logs[id] || []).slice(-30).reverse()) {
    ul.append(el("li", { text: new Date(e.at).toISOString().slice(11, 19) + " " + (e.host ? e.host + " " : "") + e.kind + ": " + e.detail }));
  }
}

// handlers of the stream's messages, by type.
const on = {
  open() { showLive("live", true); refreshAll().catch(console.warn); },
  error() { if (secret) showLive("reconnecting", false); },
  loggedout(m) { loggedOut(m && m.secret); },
  sweep(m) {
    soon("list", refreshList);
    if (state.detail[m.id] || m.state === "running") soon("detail" + m.id, () => refreshDetail(m.id));
  },
  run(m) {
    soon("results" + m.sweep, () => refreshResults(m.sweep), 200);
    soon("detail" + m.sweep, () => refreshDetail(m.sweep), 400);
  },
  log(m) {
    if (!m.sweep) return;
    (state.logs[m.sweep] = state.logs[m.sweep] || []).push(m);
    if (state.logs[m.sweep].length > 200) state.logs[m.sweep].shift();
    soon("detail" + m.sweep, () => refreshDetail(m.sweep), 400);
  },
  activity(m) {
    const d = state.detail[m.sweep];
    if (!d) { soon("detail" + m.sweep, () => refreshDetail(m.sweep)); return; }
    d.activity = d.activity || {};
    d.activity[m.key] = m.activity;
    renderCard(m.sweep);
  },
  hello() {},
};

function dispatch(m) {
  const h = on[m.type];
  if (!h) return;
  if (m.type === "loggedout") h(m);
  else h(m.data === undefined ? undefined : JSON.parse(m.data));
}

// connect follows the daemon's event stream through the tabs' shared worker (static/events.js),
// or a worker of this tab's own where the browser has no SharedWorker, and hands it the secret.
function connect() {
  if (!worker) {
    if (window.SharedWorker) {
      const w = new SharedWorker("/static/events.js");
      w.port.onmessage = ev => dispatch(ev.data);
      w.port.start();
      window.addEventListener("pagehide", () => w.port.postMessage("bye"));
      worker = w.port;
    } else {
      const w = new Worker("/static/events.js");
      w.onmessage = ev => dispatch(ev.data);
      worker = w;
    }
  }
  worker.postMessage({ type: "secret", secret: secret });
}

// login trades the one-time code of a login URL (its fragment) for a session.
async function login(code) {
  history.replaceState(null, "", "/"); // the code leaves the address bar and the history
  const r = await fetch("/api/sessions", { method: "POST", credentials: "omit", cache: "no-store",
    headers: { "Content-Type": "application/json" }, body: JSON.stringify({ code: code }) });
  if (!r.ok) {
    let msg = String(r.status);
    try { msg = (await r.json()).error; } catch (e) { /* not JSON */ }
    throw new Error(msg);
  }
  secret = (await r.json()).secret;
  localStorage.setItem(KEY, secret);
}

async function logout() {
  try { await send("/api/logout", { method: "POST" }); } catch (e) { console.warn("logout", e); }
  if (worker) worker.postMessage({ type: "logout" });
  loggedOut(null);
}

async function start() {
  const m = /^#code=([0-9a-f]+)$/.exec(location.hash);
  if (m) {
    try { await login(m[1]); } catch (e) { showLive("login failed: " + e.message, false); return; }
  }
  if (!secret) { loggedOut(null); return; }
  document.getElementById("logout").hidden = false;
  showLive("connecting", false);
  connect();
}

// Another tab logged in or out.
window.addEventListener("storage", ev => {
  if (ev.key !== KEY) return;
  if (ev.newValue) { secret = ev.newValue; start(); } else if (secret) loggedOut(secret);
});
window.addEventListener("hashchange", () => start()); // a login URL opened on the page itself
document.getElementById("logout").addEventListener("click", () => logout());
setInterval(() => { for (const id of Object.keys(state.detail)) renderCard(Number(id)); }, 5000);
start();
