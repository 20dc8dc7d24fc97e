// flowledger dashboard: the shared worker that holds one live stream for all the tabs
// of this browser (a browser opens at most six HTTP/1.1 connections per host, so a
// stream per tab left the seventh tab without one). Each tab sends {op: "open", url}
// with its page stream's address and {op: "close"} when it goes; the worker holds one
// GET /events?sub=URL&sub=URL... (the server's flowledger.web.mux) for all of them and
// posts each tab its events as {event, data}, data being the page stream's JSON text.
"use strict";

const PER_STREAM = 20; // the server's limit of sub streams in one stream (mux.MAX_PARTS)
const EVENTS = ["row", "activity", "run", "refused"];
const tabs = new Map(); // port -> the address of its page stream, cursor moved on
let streams = []; // {source, ports}: one per PER_STREAM tabs
let timer = 0;
let backoff = 1000;

// The page streams read on from the cursor in their address: the runs table from the
// "since" mark, a run from the "after" history cursor.
function moved(url, id) {
  const address = new URL(url, self.location.origin);
  address.searchParams.set(address.pathname === "/events/runs" ? "since" : "after", id);
  return address.pathname + address.search;
}

function deliver(entry, name, event) {
  const message = JSON.parse(event.data);
  const port = entry.ports[message.sub];
  if (!port || !tabs.has(port)) return; // that tab has gone since
  if (name === "refused") {
    tabs.delete(port); // asking again would be refused again
    port.postMessage({ event: name, data: JSON.stringify(message) });
    return;
  }
  if (message.id !== null) tabs.set(port, moved(tabs.get(port), message.id));
  port.postMessage({ event: name, data: JSON.stringify(message.data) });
}

function connect() {
  for (const entry of streams) entry.source.close();
  streams = [];
  const ports = [...tabs.keys()];
  for (let start = 0; start < ports.length; start += PER_STREAM) {
    const group = ports.slice(start, start + PER_STREAM);
    const query = group.map((port) => "sub=" + encodeURIComponent(tabs.get(port))).join("&");
    const entry = { source: new EventSource("/events?" + query), ports: group };
    for (const name of EVENTS) {
      entry.source.addEventListener(name, (event) => deliver(entry, name, event));
    }
    entry.source.addEventListener("open", () => {
      backoff = 1000;
    });
    // The browser would reconnect with the addresses it started from; the worker
    // reconnects with the cursors moved on instead (no event twice).
    entry.source.addEventListener("error", () => {
      if (!streams.includes(entry)) return;
      entry.source.close();
      schedule(backoff);
      backoff = Math.min(backoff * 2, 30000);
    });
    streams.push(entry);
  }
}

function schedule(delay) {
  clearTimeout(timer);
  timer = setTimeout(connect, delay);
}

self.addEventListener("connect", (event) => {
  const port = event.ports[0];
  port.addEventListener("message", (message) => {
    if (message.data.op === "open") {
      tabs.set(port, message.data.url);
      schedule(50); // tabs opened together share one reconnect
    } else {
      // its part of the stream is left to run until the next reconnect: closing a tab
      // does not make every other tab's stream start over
      tabs.delete(port);
      if (tabs.size === 0) schedule(0);
    }
  });
  port.start();
});
