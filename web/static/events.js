// One event stream for every dashboard tab of this browser: a SharedWorker holds the EventSource
// and passes its events to each tab. Over HTTP/1.1 a browser opens at most six connections to a
// host, and a stream holds one for good: one stream per tab would leave the seventh tab waiting.
"use strict";

const ports = new Set();
let es = null;
let open = false;

function broadcast(m) {
  for (const p of ports) p.postMessage(m);
}

function connect() {
  es = new EventSource("/api/events");
  es.addEventListener("open", () => { open = true; broadcast({ type: "open" }); });
  es.addEventListener("error", () => { open = false; broadcast({ type: "error" }); });
  for (const kind of ["hello", "run", "log", "sweep", "activity"]) {
    es.addEventListener(kind, ev => broadcast({ type: kind, data: ev.data }));
  }
}

self.onconnect = e => {
  const port = e.ports[0];
  ports.add(port);
  port.onmessage = ev => {
    if (ev.data === "bye") ports.delete(port);
  };
  port.start();
  if (!es) connect();
  else if (open) port.postMessage({ type: "open" });
};
