// One event stream for every dashboard tab of this browser: a SharedWorker follows /api/events and
// passes its events to each tab. Over HTTP/1.1 a browser opens at most six connections to a host,
// and a stream holds one for good: one stream per tab would leave the seventh tab waiting.
// The stream is read with fetch, not EventSource, because it carries the session's secret in a
// header (EventSource sends only what the browser attaches by itself). The tabs hand the worker the
// secret; a browser without SharedWorker runs this file as a dedicated worker of one tab.
"use strict";

const HEADER = "X-Specsweep-Session";
const ports = new Set();
let secret = null;   // the session's secret, from a tab
let abort = null;    // ends the current stream
let open = false;
let lastID = "";     // the last event id, sent as Last-Event-ID on a reconnect
let retry = 1000;

function broadcast(m) {
  for (const p of ports) p.postMessage(m);
}

// follow reads the stream of one secret until it ends, then reconnects while the secret holds.
async function follow(mine) {
  const ctl = new AbortController();
  abort = ctl;
  while (secret === mine && !ctl.signal.aborted) {
    try {
      const headers = { [HEADER]: mine, Accept: "text/event-stream" };
      if (lastID) headers["Last-Event-ID"] = lastID;
      const r = await fetch("/api/events", { headers, cache: "no-store", credentials: "omit", signal: ctl.signal });
      if (r.status === 401 || r.status === 403) {
        // The session ended (logout, revoke, expiry, a restarted daemon): tell the tabs, stop.
        if (secret === mine) secret = null;
        open = false;
        broadcast({ type: "loggedout", secret: mine });
        return;
      }
      if (!r.ok || !r.body) throw new Error("events: " + r.status);
      open = true;
      retry = 1000;
      broadcast({ type: "open" });
      await read(r.body.getReader());
    } catch (e) {
      if (ctl.signal.aborted) return;
    }
    open = false;
    broadcast({ type: "error" });
    // The daemon closed the stream or went away: try again (a closed session answers 403 then).
    await new Promise(res => setTimeout(res, retry));
    retry = Math.min(retry * 2, 10000);
  }
}

// read parses Server-Sent Events (id, event, data lines; comments start with ":").
async function read(reader) {
  const dec = new TextDecoder();
  let buf = "";
  let ev = { id: null, kind: "message", data: [] };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.search(/\r?\n/)) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + (buf[i] === "\r" ? 2 : 1));
      if (line === "") {
        if (ev.data.length) {
          if (ev.id !== null) lastID = ev.id;
          broadcast({ type: ev.kind, data: ev.data.join("\n") });
        }
        ev = { id: null, kind: "message", data: [] };
        continue;
      }
      if (line.startsWith(":")) continue;
      const c = line.indexOf(":");
      const field = c < 0 ? line : line.slice(0, c);
      const val = c < 0 ? "" : line.slice(c + 1).replace(/^ /, "");
      if (field === "id") ev.id = val;
      else if (field === "event") ev.kind = val;
      else if (field === "data") ev.data.push(val);
    }
  }
}

function stop() {
  secret = null;
  open = false;
  if (abort) abort.abort();
  abort = null;
}

function onmessage(port, m) {
  if (m === "bye" || (m && m.type === "bye")) { ports.delete(port); return; }
  if (!m || typeof m !== "object") return;
  if (m.type === "secret" && m.secret) {
    if (m.secret === secret) {
      if (open) port.postMessage({ type: "open" });
      return;
    }
    stop();
    secret = m.secret;
    lastID = "";
    follow(secret);
  } else if (m.type === "logout") {
    const was = secret;
    stop();
    broadcast({ type: "loggedout", secret: was });
  }
}

if (typeof SharedWorkerGlobalScope !== "undefined" && self instanceof SharedWorkerGlobalScope) {
  self.onconnect = e => {
    const port = e.ports[0];
    ports.add(port);
    port.onmessage = ev => onmessage(port, ev.data);
    port.start();
  };
} else {
  // A dedicated worker of one tab: the tab is the only port.
  ports.add(self);
  self.onmessage = ev => onmessage(self, ev.data);
}
