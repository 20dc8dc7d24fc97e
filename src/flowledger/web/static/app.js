// flowledger dashboard: live updates over Server-Sent Events, and form checks.
// The server renders every fragment (escaped); this script only places them.
"use strict";

// A page's live stream. A browser opens at most six HTTP/1.1 connections per host, so
// the tabs share one stream through a shared worker (live-worker.js); where there are
// no shared workers, the page opens its own.
function liveStream(url) {
  let worker;
  try {
    worker = new SharedWorker("/static/live-worker.js", { name: "flowledger-live" });
  } catch {
    return new EventSource(url);
  }
  const target = new EventTarget();
  const port = worker.port;
  port.addEventListener("message", (message) => {
    const { event, data } = message.data;
    target.dispatchEvent(new MessageEvent(event, { data }));
  });
  port.start();
  port.postMessage({ op: "open", url });
  window.addEventListener("pagehide", () => port.postMessage({ op: "close" }));
  // back from the back-forward cache: the stream starts again from the page's own
  // cursor (the page drops timeline rows it has; a row sent again replaces itself)
  window.addEventListener("pageshow", (event) => {
    if (event.persisted) port.postMessage({ op: "open", url });
  });
  target.addEventListener("refused", (event) => {
    console.warn("live stream refused:", JSON.parse(event.data).message);
  });
  return target;
}

// each vertex state's sign (the server's graph.MARKS): state not by colour alone
const MARKS = { running: "▶", done: "✓", paused: "‖", failed: "✗", cancelled: "■", not_reached: "" };

function fragmentRows(html) {
  const body = document.createElement("tbody");
  body.innerHTML = html.trim();
  return body.firstElementChild;
}

function liveRuns(table) {
  const source = liveStream(table.dataset.stream);
  const body = table.tBodies[0];
  source.addEventListener("row", (event) => {
    const data = JSON.parse(event.data);
    const row = fragmentRows(data.html);
    const current = body.querySelector(`tr[data-run="${data.run_id}"]`);
    if (current) {
      current.replaceWith(row);
    } else if (table.dataset.firstPage === "true") {
      body.prepend(row);
      const empty = document.getElementById("no-runs");
      if (empty) empty.remove();
    } else {
      return;
    }
    row.classList.add("fresh");
  });
}

function liveRun(root) {
  const source = liveStream(root.dataset.stream);
  const timeline = document.getElementById("timeline");
  source.addEventListener("activity", (event) => {
    if (root.dataset.atEnd !== "true") return; // an earlier page: the later link shows more
    const row = fragmentRows(JSON.parse(event.data).html);
    if (timeline.querySelector(`tr[data-event="${row.dataset.event}"]`)) return;
    row.classList.add("fresh");
    timeline.append(row);
  });
  source.addEventListener("run", (event) => {
    const data = JSON.parse(event.data);
    document.getElementById("header").innerHTML = data.header;
    const actions = document.getElementById("actions");
    // the panel is only replaced when the pause changed: what someone is typing, and
    // the server's answer to the last submission, stay
    if (actions.dataset.pause !== data.pause) {
      actions.innerHTML = data.pending;
      actions.dataset.pause = data.pause;
      bindForms(actions);
    }
    for (const [vertex, state] of Object.entries(data.states)) {
      const node = document.querySelector(`svg.graph .vertex[data-vertex="${vertex}"]`);
      if (node) {
        node.dataset.state = state;
        const mark = node.querySelector("text.mark");
        if (mark) mark.textContent = MARKS[state] ?? "";
        const title = node.querySelector("title");
        if (title) title.textContent = `${vertex}: ${state.replace("_", " ")}`;
      }
    }
    root.dataset.status = data.status;
  });
}

// JSON fields are checked in the page (the browser checks the other constraints);
// the server checks everything again.
function checkJson(field) {
  if (!field.value.trim()) {
    field.setCustomValidity("");
    return;
  }
  try {
    JSON.parse(field.value);
    field.setCustomValidity("");
  } catch (error) {
    field.setCustomValidity(`not valid JSON: ${error.message}`);
  }
}

function bindForms(scope) {
  // a form that cannot be undone (cancel) asks first
  for (const form of scope.querySelectorAll("form[data-confirm]")) {
    form.addEventListener("submit", (event) => {
      if (!window.confirm(form.dataset.confirm)) event.preventDefault();
    });
  }
  for (const form of scope.querySelectorAll("form.schema-form")) {
    for (const field of form.querySelectorAll("textarea[data-json]")) {
      field.addEventListener("input", () => checkJson(field));
    }
    form.addEventListener("submit", (event) => {
      for (const field of form.querySelectorAll("textarea[data-json]")) checkJson(field);
      if (!form.noValidate && !form.checkValidity()) {
        event.preventDefault();
        form.reportValidity();
      }
    });
  }
}

// Times: the server writes UTC (what a page without script shows); here each <time>
// reads in the browser's zone (named) with how long ago, the UTC text on hover.
const RELATIVE = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" });
const UNITS = [["day", 86400], ["hour", 3600], ["minute", 60], ["second", 1]];

function ago(when) {
  const seconds = (when.getTime() - Date.now()) / 1000;
  for (const [unit, size] of UNITS) {
    if (Math.abs(seconds) >= size || unit === "second") {
      return RELATIVE.format(Math.round(seconds / size), unit);
    }
  }
  return "";
}

function localTime(element) {
  const when = new Date(element.getAttribute("datetime"));
  if (Number.isNaN(when.getTime())) return;
  if (!element.dataset.utc) {
    element.dataset.utc = element.textContent;
    element.title = element.textContent;
  }
  const local = when.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "long" });
  element.textContent = `${local} (${ago(when)})`;
  element.dataset.local = "1";
}

function localTimes(scope) {
  if (scope.matches && scope.matches("time[datetime]")) localTime(scope);
  for (const element of scope.querySelectorAll("time[datetime]")) localTime(element);
}

document.addEventListener("DOMContentLoaded", () => {
  localTimes(document);
  // rows and headers the live stream places read the same way; "ago" moves on
  new MutationObserver((changes) => {
    for (const change of changes) {
      for (const node of change.addedNodes) if (node.nodeType === 1) localTimes(node);
    }
  }).observe(document.body, { childList: true, subtree: true });
  setInterval(() => localTimes(document), 30000);
  // a page answered to a form's POST: the address bar shows the page's own address, so
  // a reload reads it again instead of posting the form again
  const address = document.body.dataset.address;
  if (address) history.replaceState(null, "", address);
  const runs = document.getElementById("runs");
  if (runs && runs.dataset.stream) liveRuns(runs);
  const run = document.getElementById("run");
  if (run && run.dataset.stream) liveRun(run);
  bindForms(document);
});
