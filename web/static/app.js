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
// loaded: the sweeps were read once (until then the page says it is loading, never "no sweep");
// opened: the sweep whose card the Finished list opened (#sweep=ID); scrollTo: a card to bring
// into view once it is drawn.
// watches: each watched host's latest watch (GET /api/watches).
const state = { sweeps: [], detail: {}, results: {}, logs: {}, opened: null, loaded: false, scrollTo: null, watches: [] };
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
  placeholders("Not logged in: open a login URL from `specsweep dashboard`.");
}

// placeholders says what the lists would hold while the page has read nothing (not logged in, a
// failed login); once the sweeps were read, the lists keep what they show.
function placeholders(text) {
  if (state.loaded) return;
  document.getElementById("running").replaceChildren(el("p", { class: "muted", text: text }));
  for (const [id, cols] of [["queue", 6], ["finished", 8]]) {
    document.querySelector("#" + id + " tbody").replaceChildren(el("tr", {}, el("td", { colspan: cols, class: "muted", text: text })));
  }
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

// soon runs fn ms (250 by default) after the first call of a burst with the same key: once per
// burst, and never twice at once. A call while fn runs asks for one more run after it ends (what
// it was called for may have come after fn read the daemon), so that a tab has at most one request
// of each kind in flight however fast the events come: eight tabs refreshing a fast sweep's
// results for every event queued requests faster than the browser's six connections to the
// daemon served them.
const refreshes = {}; // key -> "waiting", "running" or "again"
function soon(key, fn, ms) {
  const was = refreshes[key];
  if (was === "running") refreshes[key] = "again";
  if (was) return;
  refreshes[key] = "waiting";
  setTimeout(async () => {
    refreshes[key] = "running";
    try { await fn(); } catch (err) { console.warn(key, err); }
    const again = refreshes[key] === "again";
    delete refreshes[key];
    if (again) soon(key, fn, ms);
  }, ms || 250);
}

async function refreshAll() {
  const watches = refreshWatches().catch(err => console.warn("watches", err)); // the sweeps do not wait for it
  await refreshList();
  const ids = state.sweeps.filter(s => s.state === "running").map(s => s.id);
  if (state.opened) ids.push(state.opened);
  await Promise.all(ids.map(id => Promise.all([refreshDetail(id), refreshResults(id)])));
  await watches;
}

// loadAll reads everything when the stream opens, and again after a failed read (1 s, doubling to
// 30 s) until one succeeds: a tab whose first read failed stayed empty until an event came, and a
// sweep whose servers load for an hour sends none. A later open, or a logout, ends the retries.
let loads = 0;
async function loadAll() {
  const mine = ++loads;
  for (let wait = 1000; ; wait = Math.min(2 * wait, 30000)) {
    try { await refreshAll(); return; } catch (err) { console.warn("reading the daemon", err); }
    await new Promise(ok => setTimeout(ok, wait));
    if (mine !== loads || !secret) return;
  }
}

// refreshWatches reads each watched host's latest watch (`specsweep watch`): again when the stream
// logs a watch's verdict or a regression.
async function refreshWatches() {
  state.watches = await api("/api/watches");
  renderWatches();
}

// renderWatches lists each watched host with its latest verdict; a host whose latest watch found
// regressions is marked as such, with each regression's sentence. No section when no host was ever
// watched.
function renderWatches() {
  const section = document.getElementById("watches-section");
  const tb = document.querySelector("#watches tbody");
  tb.replaceChildren();
  section.hidden = !state.watches.length;
  const bad = state.watches.filter(w => w.regressions.length);
  const note = document.getElementById("watches-note");
  note.textContent = bad.length
    ? bad.length + " of " + state.watches.length + " watched host(s) regressed: " + bad.map(w => w.host).join(", ")
    : "No regression in the latest watch of any host.";
  note.className = "note" + (bad.length ? " bad" : "");
  for (const w of state.watches) {
    const regressed = w.regressions.length > 0;
    const open = el("a", { class: "open", href: "#sweep=" + w.sweep_id, title: "open its results", text: (w.sweep || "sweep") + " (" + w.sweep_id + ")" });
    open.addEventListener("click", () => { if (location.hash === "#sweep=" + w.sweep_id) openSweep(w.sweep_id); });
    const list = regressed
      ? el("ul", { class: "regressions" }, ...w.regressions.map(r => el("li", { "data-measure": r.measure, text: r.detail })))
      : el("span", { class: "muted", text: "None." });
    tb.append(el("tr", { class: regressed ? "regressed" : "clean", "data-host": w.host },
      el("td", { class: "host", text: w.host }),
      el("td", { class: "wrap" }, el("span", { class: "badge " + (regressed ? "regressed" : "clean"), text: regressed ? "regressed" : "ok" }), " ",
        el("span", { class: "verdict", text: w.verdict })),
      el("td", { class: "wrap" }, list), el("td", {}, open), el("td", { text: when(w.at) })));
  }
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
  state.loaded = true;
  renderLists();
  renderRunning();
  renderOpened();
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
    // The name links to the sweep's results card (#sweep=ID: a link to keep or share, opened here).
    const open = el("a", { class: "open", href: "#sweep=" + s.id, title: "open its results", text: s.name });
    open.addEventListener("click", () => { if (location.hash === "#sweep=" + s.id) openSweep(s.id); }); // open already: bring it back
    const tr = el("tr", { class: "clickable" + (state.opened === s.id ? " opened" : ""), "data-sweep": s.id },
      el("td", { text: s.id }), el("td", {}, open),
      el("td", {}, el("span", { class: "badge " + s.state, text: s.state })), el("td", { class: "num", text: s.done }),
      el("td", { class: "num", text: s.failed }), el("td", { class: "num", text: s.pruned }),
      el("td", { text: when(s.finished_at) }), el("td", {}, reportLink(s.id)));
    tr.addEventListener("click", ev => {
      if (ev.target.tagName === "A") return;
      if (state.opened === s.id) closeSweep(); else location.hash = "#sweep=" + s.id;
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

// renderOpened shows the card of the sweep the Finished list opened, below the list; a sweep that
// runs has its card under Running already, which it brings into view instead.
function renderOpened() {
  const box = document.getElementById("opened");
  const id = state.opened;
  const running = id && state.sweeps.some(s => s.id === id && s.state === "running");
  const card = box.querySelector("article.sweep");
  if (id && state.loaded && !state.sweeps.some(s => s.id === id)) box.replaceChildren(el("p", { class: "muted", text: "No sweep " + id + "." }));
  else if (!id || running) box.replaceChildren();
  else if (!card || card.dataset.sweep !== String(id)) { box.replaceChildren(newCard(id)); renderCard(id); }
  for (const tr of document.querySelectorAll("#finished tbody tr[data-sweep]")) tr.classList.toggle("opened", tr.dataset.sweep === String(id));
  if (state.scrollTo && state.loaded) {
    const c = document.querySelector('article.sweep[data-sweep="' + state.scrollTo + '"]');
    if (c) { state.scrollTo = null; c.scrollIntoView({ block: "start" }); }
  }
}

// openSweep opens a sweep's results card (the link #sweep=ID) and reads its data.
function openSweep(id) {
  state.opened = id;
  state.scrollTo = id;
  renderOpened();
  if (secret && state.loaded) Promise.all([refreshDetail(id), refreshResults(id)]).catch(console.warn);
}

function closeSweep() {
  state.opened = null;
  history.replaceState(null, "", location.pathname);
  renderOpened();
}

// route follows the address's fragment: a login code, or a sweep to open.
function route() {
  const m = /^#sweep=(\d+)$/.exec(location.hash);
  if (m) openSweep(Number(m[1]));
  else if (/^#code=/.test(location.hash)) start();
  else if (state.opened) { state.opened = null; renderOpened(); }
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
  fillHosts(c, s, !state.detail[id]);
  const res = state.results[id];
  if (res) {
    fillTable(c.querySelector(".best"), res.best, c.querySelector(".best-note"), res.levels || []);
    fillTable(c.querySelector(".results"), res.results, c.querySelector(".results-note"));
    fillSources(c, res);
    fillRecommendation(c, res.recommendation);
    // The x axis spans the num_steps planned, so it holds still while the runs arrive.
    const planned = (s.point_list || []).filter(p => p.num_steps != null && p.state !== "pruned").map(p => p.num_steps);
    drawChart(c.querySelector(".chart"), c.querySelector(".legend"), res.chart || [], res.levels || [], planned);
  }
  fillFailures(c, s);
  fillLog(c, id);
}

// fillSources shows each prompt source's winner and the acceptance matrices of a sweep measured on
// several prompt sources (the report's tables); hidden otherwise.
function fillSources(c, res) {
  const box = c.querySelector(".by-source");
  const has = res.sources && res.sources.rows && res.sources.rows.length > 0;
  box.hidden = !has;
  if (!has) return;
  fillTable(c.querySelector(".sources"), res.sources, c.querySelector(".sources-note"));
  const acc = c.querySelector(".accept");
  acc.replaceChildren();
  for (const t of res.accept || []) {
    const div = el("div", { class: "scroll" });
    const note = el("p", { class: "note" });
    acc.append(el("h5", { text: t.title }), note, div);
    fillTable(div, t, note);
  }
}

// fillRecommendation shows the report's recommendation (report.Live's recommendation: the one
// configuration for equal time at each measured level, as `specsweep recommend SWEEP` prints it):
// the winner and its mix, its gains over the baseline and the runner-up with their noise verdicts,
// the levels where it is not the best, the SGLang arguments to deploy it and, at the edge of the
// swept range, the next sweep. Without a winner yet it says why, once some level is measured.
function fillRecommendation(c, rec) {
  const box = c.querySelector(".recommend");
  const has = rec && (rec.winner || (rec.none && rec.traffic && rec.traffic.length > 0));
  box.hidden = !has;
  if (!has) return;
  const levels = (rec.traffic || []).map(t => t.concurrency).join(", ");
  box.querySelector(".rec-mix").textContent = rec.default_mix
    ? "for equal time at each measured concurrency (c=" + levels + ")"
    : "for " + (rec.traffic || []).map(t => "c=" + t.concurrency + " " + (100 * t.share).toFixed(1) + "%").join(", ");
  const none = box.querySelector(".rec-none");
  none.hidden = !!rec.winner;
  for (const sel of [".rec-winner", ".rec-facts", ".rec-deploy"]) box.querySelector(sel).hidden = !rec.winner;
  box.querySelector(".rec-next").hidden = !rec.next_sweep;
  if (!rec.winner) {
    none.textContent = "No recommendation yet: " + rec.none + ".";
    return;
  }
  const w = rec.winner;
  box.querySelector(".rec-winner").textContent = w.label + " (point " + w.point + "): " + w.tok_s.toFixed(1) + " tok/s over the mix";
  const pct = v => (v >= 0 ? "+" : "") + v.toFixed(1) + "%";
  const noise = n => n === "unknown" ? "noise unknown: one repeat" : n;
  const facts = [];
  if (w.baseline) facts.push("A baseline: speculative decoding does not pay for this mix.");
  else if (rec.baseline) facts.push(pct(rec.over_baseline.pct) + " over the baseline at tp=" + w.tp + " (" + noise(rec.over_baseline.noise) + ")");
  else facts.push("No baseline at tp=" + w.tp + " measured at every level to compare with.");
  if (rec.runner_up) facts.push(pct(rec.over_runner_up.pct) + " over the runner-up, " + rec.runner_up.label + " (" + noise(rec.over_runner_up.noise) + ")");
  const behind = (rec.levels || []).filter(l => !l.best_here)
    .map(l => "c=" + l.concurrency + ": " + pct(l.pct) + " vs " + l.best + " (" + noise(l.noise) + ")");
  facts.push(behind.length ? "Not the best at " + behind.join("; ") : "The best at every level of the mix, of " + rec.candidates + " configuration(s) measured at each.");
  if (rec.dropped && rec.dropped.length) facts.push(rec.dropped.length + " configuration(s) did not compete: " + rec.dropped.map(d => d.label + " (" + d.reason + ")").join("; "));
  box.querySelector(".rec-facts").replaceChildren(...facts.map(f => el("li", { text: f })));
  const d = rec.deploy || {};
  box.querySelector(".rec-args").textContent = d.args_line || "(the point's argv is not recorded)";
  const env = Object.entries(d.env || {}).sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => k + "=" + v);
  const envBox = box.querySelector(".rec-env");
  envBox.hidden = env.length === 0;
  envBox.textContent = "Environment: " + env.join(" ");
  if (rec.next_sweep) {
    box.querySelector(".rec-next summary").textContent = "At the edge of the swept range at c=" + rec.next_sweep.levels.join(", ") + ": " +
      rec.next_sweep.why.join("; ") + ". The next sweep, as a spec fragment:";
    box.querySelector(".rec-spec").textContent = rec.next_sweep.spec;
  }
}

// fillHosts lists what each host (each slot of a packing host) does: the phase in one word, what
// it does in it under detail.
function fillHosts(c, s, loading) {
  const tb = c.querySelector("table.hosts tbody");
  tb.replaceChildren();
  const acts = Object.entries(s.activity || {}).sort(([a], [b]) => a.localeCompare(b, undefined, { numeric: true }));
  for (const [key, a] of acts) {
    const down = a.phase === "retry" || (a.phase === "failed" && !a.point);
    const phase = el("td", { class: "phase", text: a.phase });
    if (down) phase.title = "host down?";
    const tr = el("tr", { class: down ? "down" : "", "data-host": key },
      el("td", { text: key }), el("td", { class: "gpus", text: gpusOf(s, a) }),
      phase, el("td", { text: a.label || "" }),
      el("td", { class: "wrap", text: a.detail || "" }), el("td", { text: ago(a.at) }));
    tb.append(tr);
  }
  const none = loading ? "Loading…" : s.state === "running" ? "Starting." : "Not running.";
  if (!acts.length) tb.append(el("tr", {}, el("td", { colspan: 6, class: "muted", text: none })));
}

// gpusOf is the GPUs column: the indices a packing slot's point holds; for a host that runs one
// point at a time, the host's GPUs (all of them, or its point's tp of them); for a slot of a host
// that places its points itself (a Slurm cluster), the point's tp.
function gpusOf(s, a) {
  if (a.gpus && a.gpus.length) return a.gpus.join(",");
  const p = a.point ? (s.point_list || []).find(p => p.id === a.point) : null;
  if (a.slot != null) return p ? p.tp + " (the cluster's)" : "";
  const h = (s.hosts || []).find(h => h.name === a.host);
  if (!h || !h.gpus) return p ? String(p.tp) : "";
  return p && p.tp < h.gpus ? p.tp + " of " + h.gpus : "all " + h.gpus;
}

// fillTable draws one of the report's tables. levels (the best table's): a row whose level is not
// final yet (a point planned at its tp not measured there, and still to run) is marked provisional,
// with how many of the level's points are measured.
function fillTable(box, t, note, levels) {
  box.replaceChildren();
  const provisional = [];
  if (!t || !t.rows || !t.rows.length) {
    if (note) note.textContent = (t && t.note) || "";
    box.append(el("p", { class: "muted", text: "No runs yet." }));
    return;
  }
  const old = box.dataset.rows ? new Set(JSON.parse(box.dataset.rows)) : null;
  const table = el("table", {}, el("thead", {}, el("tr", {}, ...t.head.map(h => el("th", { text: h })))));
  const tb = el("tbody");
  const keys = [];
  for (const row of t.rows) {
    const key = row.slice(0, 3).join("|");
    keys.push(key);
    const lv = levels && levels.find(l => String(l.tp) === row[0] && String(l.concurrency) === row[1]);
    const prov = lv && !lv.final;
    const tr = el("tr", { class: (old && !old.has(key) ? "fresh" : "") + (prov ? " provisional" : "") },
      ...row.map((v, i) => el("td", { class: (t.num && t.num[i] ? "num" : "") + (t.code && t.code[i] ? " code" : ""), text: v })));
    if (prov) {
      provisional.push(lv);
      tr.children[2].append(el("span", { class: "prov", text: "provisional: " + lv.measured + " of " + lv.planned + " points measured" }));
    }
    tb.append(tr);
  }
  if (note) {
    note.textContent = (t.note || "") + (provisional.length
      ? " Provisional: a level where some planned point has not been measured yet; its best may still change."
      : "");
  }
  table.append(tb);
  box.append(table);
  box.dataset.rows = JSON.stringify(keys);
}

// The live chart: output tok/s against num_steps, one line per level (the best configuration at each
// num_steps), the baseline of each level as a dashed line in its colour. Drawn as inline SVG from the
// results' chart data (no script from elsewhere: the page's CSP allows none), again at every run.
const SVG = "http://www.w3.org/2000/svg";
const COLORS = ["#0969da", "#cf222e", "#1a7f37", "#8250df", "#bc4c00", "#0a7480", "#bf3989", "#57606a"];

function svg(tag, attrs, ...kids) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "text") e.textContent = v; else e.setAttribute(k, v);
  }
  for (const k of kids) if (k != null) e.append(k);
  return e;
}

// niceTicks are about n round values (1, 2 or 5 times a power of ten) from lo to hi.
function niceTicks(lo, hi, n) {
  const raw = (hi - lo) / Math.max(1, n);
  const mag = Math.pow(10, Math.floor(Math.log10(raw || 1)));
  const step = [1, 2, 5, 10].map(m => m * mag).find(v => v >= raw) || raw;
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(+v.toPrecision(12));
  return out;
}

// logTicks are the 1, 2, 5 times powers of ten from lo to hi.
function logTicks(lo, hi) {
  const out = [];
  for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
    for (const m of [1, 2, 5]) {
      const v = m * Math.pow(10, e);
      if (v >= lo && v <= hi) out.push(v);
    }
  }
  return out;
}

function fmtTok(v) {
  return v >= 10000 ? (v / 1000).toFixed(0) + "k" : v >= 1000 ? (v / 1000).toFixed(1).replace(/\.0$/, "") + "k" : String(+v.toPrecision(3));
}

function drawChart(box, legend, curves, levels, planned) {
  // Drawn again only when its data or its width changed (the card is filled every few seconds, and
  // a new drawing would drop the tooltip under the pointer).
  const drawn = JSON.stringify([curves, levels, planned, box.clientWidth]);
  if (box.dataset.drawn === drawn) return;
  box.dataset.drawn = drawn;
  box.replaceChildren();
  legend.replaceChildren();
  if (!curves.length) { box.append(el("p", { class: "muted", text: "No runs yet." })); return; }
  const tps = new Set(curves.map(c => c.tp));
  const name = c => (tps.size > 1 ? "tp=" + c.tp + " " : "") + "c=" + c.concurrency;
  const steps = curves.flatMap(c => c.points.map(p => p.num_steps)).concat(planned || []);
  const ys = curves.flatMap(c => c.points.map(p => p.tok_s).concat(c.baseline != null ? [c.baseline] : [])).filter(v => v > 0);
  let x0 = steps.length ? Math.min(...steps) : 0, x1 = steps.length ? Math.max(...steps) : 1;
  if (x0 === x1) { x0 -= 1; x1 += 1; }
  const ymax = Math.max(...ys, 1), ymin = Math.min(...ys, ymax);
  // Levels far apart (c=1 beside c=64) share a log axis, where a level's speedup over its baseline
  // is the same height at every level; close ones a linear axis from 0.
  const log = ymax / ymin > 8;
  const lo = log ? Math.pow(10, Math.floor(Math.log10(ymin / 1.1) * 4) / 4) : 0;
  const hi = log ? ymax * 1.15 : ymax * 1.08;
  // Sized to its box, so that its text stays readable on a phone.
  const W = Math.max(280, Math.min(640, box.clientWidth || 480)), H = Math.round(Math.min(320, Math.max(200, W * 0.62)));
  const m = { l: 44, r: 16, t: 10, b: 34 };
  const X = v => m.l + (v - x0) / (x1 - x0) * (W - m.l - m.r);
  const Y = v => log
    ? H - m.b - (Math.log(v) - Math.log(lo)) / (Math.log(hi) - Math.log(lo)) * (H - m.t - m.b)
    : H - m.b - (v - lo) / (hi - lo) * (H - m.t - m.b);
  const g = svg("svg", { class: "chart", viewBox: "0 0 " + W + " " + H, width: W, height: H, role: "img",
    "aria-label": "output tok/s against num_steps, one line per concurrency level, dashed: the baseline" });
  for (const v of log ? logTicks(lo, hi) : niceTicks(lo, hi, 5)) {
    g.append(svg("line", { class: "grid", x1: m.l, x2: W - m.r, y1: Y(v), y2: Y(v) }),
      svg("text", { class: "tick", x: m.l - 4, y: Y(v) + 3.5, "text-anchor": "end", text: fmtTok(v) }));
  }
  const xstep = Math.max(1, Math.ceil((x1 - x0) / 10));
  for (let v = Math.ceil(x0); v <= x1; v += xstep) {
    g.append(svg("line", { class: "tickmark", x1: X(v), x2: X(v), y1: H - m.b, y2: H - m.b + 4 }),
      svg("text", { class: "tick", x: X(v), y: H - m.b + 15, "text-anchor": "middle", text: v }));
  }
  g.append(svg("line", { class: "axis", x1: m.l, x2: W - m.r, y1: H - m.b, y2: H - m.b }),
    svg("line", { class: "axis", x1: m.l, x2: m.l, y1: m.t, y2: H - m.b }),
    svg("text", { class: "label", x: (m.l + W - m.r) / 2, y: H - 3, "text-anchor": "middle", text: "num_steps" }),
    svg("text", { class: "label", x: m.l + 4, y: m.t + 9, text: "output tok/s" + (log ? " (log)" : "") }));
  curves.forEach((c, i) => {
    const color = COLORS[i % COLORS.length];
    const lv = levels.find(l => l.tp === c.tp && l.concurrency === c.concurrency);
    const prov = lv && !lv.final;
    const key = c.tp + "/" + c.concurrency;
    if (c.baseline != null && c.baseline > 0) {
      g.append(svg("line", { class: "baseline", "data-level": key, x1: m.l, x2: W - m.r, y1: Y(c.baseline), y2: Y(c.baseline),
        stroke: color, "stroke-dasharray": "5 4" }, svg("title", { text: name(c) + " baseline: " + fmtTok(c.baseline) + " tok/s" })));
    }
    const pts = c.points.filter(p => p.tok_s > 0);
    if (pts.length > 1) {
      g.append(svg("polyline", { class: "curve", "data-level": key, fill: "none", stroke: color,
        points: pts.map(p => X(p.num_steps).toFixed(1) + "," + Y(p.tok_s).toFixed(1)).join(" ") }));
    }
    for (const p of pts) {
      const speedup = c.baseline ? " (" + (p.tok_s / c.baseline).toFixed(2) + "× the baseline)" : "";
      g.append(svg("circle", { class: "pt", "data-level": key, cx: X(p.num_steps), cy: Y(p.tok_s), r: 3.5, fill: color },
        svg("title", { text: name(c) + ", " + p.label + ": " + fmtTok(p.tok_s) + " tok/s" + speedup })));
    }
    legend.append(el("span", { class: "key" + (prov ? " pending" : ""), "data-level": key },
      el("span", { class: "swatch", style: "background:" + color }), name(c) + (prov ? " (provisional)" : "")));
  });
  legend.append(el("span", { class: "key" }, el("span", { class: "dash" }), "baseline"));
  box.append(g);
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
  open() { showLive("live", true); loadAll(); },
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
    if (m.kind === "watch" || m.kind === "regression") soon("watches", refreshWatches, 400);
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
    try { await login(m[1]); } catch (e) {
      showLive("login failed: " + e.message, false);
      placeholders("Login failed: " + e.message);
      return;
    }
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
window.addEventListener("hashchange", route); // a sweep's link, or a login URL opened on the page itself
document.getElementById("logout").addEventListener("click", () => logout());
setInterval(() => { for (const id of Object.keys(state.detail)) renderCard(Number(id)); }, 5000);
// The chart is drawn to its box's width: again when the window changes size.
window.addEventListener("resize", () => soon("resize", async () => { for (const id of Object.keys(state.results)) renderCard(Number(id)); }, 200));
const first = /^#sweep=(\d+)$/.exec(location.hash);
if (first) openSweep(Number(first[1]));
start();
