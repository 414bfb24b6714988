// The specsweep dashboard: reads the daemon's API with the session cookie, follows /api/events, and
// builds every element with textContent (a sweep name or a log line is never read as HTML).
"use strict";

const csrf = document.querySelector('meta[name="csrf-token"]').content;
const csrfHeader = document.querySelector('meta[name="csrf-header"]').content;
const state = { sweeps: [], detail: {}, results: {}, logs: {}, opened: null };

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

async function api(path, opts) {
  const r = await fetch(path, Object.assign({ credentials: "same-origin", cache: "no-store" }, opts || {}));
  if (r.status === 401 || r.status === 403) {
    document.getElementById("live").textContent = "logged out: open a new login URL";
    throw new Error("refused: " + r.status);
  }
  if (!r.ok) throw new Error(path + ": " + r.status);
  return r.json();
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

async function refreshList() {
  state.sweeps = await api("/api/sweeps");
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
      el("td", { text: when(s.finished_at) }), el("td", {}, el("a", { href: "/sweeps/" + s.id + "/report", target: "_blank", rel: "noopener", text: "report" })));
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
  const r = await fetch("/api/sweeps/" + s.id + "/" + what, { method: "POST", credentials: "same-origin", headers: { [csrfHeader]: csrf } });
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
  const badge = c.querySelector(".state");
  badge.textContent = s.state || "";
  badge.className = "badge state " + (s.state || "");
  c.querySelector(".report").href = "/sweeps/" + id + "/report";
  c.querySelector(".export").href = "/sweeps/" + id + "/export";
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
  open() { const live = document.getElementById("live"); live.textContent = "live"; live.className = "live on"; refreshAll().catch(console.warn); },
  error() { const live = document.getElementById("live"); live.textContent = "reconnecting"; live.className = "live off"; },
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

function dispatch(type, data) {
  const h = on[type];
  if (h) h(data === undefined ? undefined : JSON.parse(data));
}

// connect follows the daemon's event stream: through the tabs' shared worker (static/events.js)
// where the browser has one, else with a stream of this tab's own.
function connect() {
  if (window.SharedWorker) {
    const w = new SharedWorker("/static/events.js");
    w.port.onmessage = ev => dispatch(ev.data.type, ev.data.data);
    w.port.start();
    window.addEventListener("pagehide", () => w.port.postMessage("bye"));
    return;
  }
  const es = new EventSource("/api/events");
  es.addEventListener("open", () => dispatch("open"));
  es.addEventListener("error", () => dispatch("error"));
  for (const kind of ["hello", "run", "log", "sweep", "activity"]) es.addEventListener(kind, ev => dispatch(kind, ev.data));
}

setInterval(() => { for (const id of Object.keys(state.detail)) renderCard(Number(id)); }, 5000);
connect();
