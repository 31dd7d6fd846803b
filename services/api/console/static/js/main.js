// The console's entry point: a router over the part of the URL after '#', so every page has a real,
// bookmarkable link and the browser's back button works. Each page module renders into <main> and may return
// a function that stops what it started (a refresh timer) when the operator leaves the page.

import { api } from "./api.js";
import { clearNotice, h } from "./ui.js";
import { parseHash } from "./router.js";
import { forgetKey, rememberKey, session, setSession } from "./session.js";
import * as overview from "./pages/overview.js";
import * as history from "./pages/history.js";
import * as jobs from "./pages/jobs.js";
import * as job from "./pages/job.js";
import * as dlq from "./pages/dlq.js";
import * as schedules from "./pages/schedules.js";
import * as workflows from "./pages/workflows.js";
import * as workflow from "./pages/workflow.js";
import * as batches from "./pages/batches.js";
import * as batch from "./pages/batch.js";

const ROUTES = [
  { pattern: /^\/$/, page: overview, nav: "overview" },
  { pattern: /^\/history$/, page: history, nav: "history" },
  { pattern: /^\/jobs$/, page: jobs, nav: "jobs" },
  { pattern: /^\/jobs\/([0-9a-fA-F]{24})$/, page: job, nav: "jobs" },
  { pattern: /^\/dlq$/, page: dlq, nav: "dlq" },
  { pattern: /^\/schedules$/, page: schedules, nav: "schedules" },
  { pattern: /^\/workflows$/, page: workflows, nav: "workflows" },
  { pattern: /^\/workflows\/([0-9a-fA-F]{24})$/, page: workflow, nav: "workflows" },
  { pattern: /^\/batches$/, page: batches, nav: "batches" },
  { pattern: /^\/batches\/([0-9a-fA-F]{24})$/, page: batch, nav: "batches" },
];

let stopCurrent = null;
let generation = 0;

async function render() {
  const { path, params } = parseHash();
  const view = document.getElementById("view");
  if (stopCurrent) stopCurrent();
  stopCurrent = null;
  const mine = ++generation;
  const route = ROUTES.find((r) => r.pattern.test(path));
  for (const a of document.querySelectorAll("[data-nav]")) {
    if (route && a.dataset.nav === route.nav) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  if (!route) {
    view.replaceChildren(h("h1", {}, "Not found"), h("p", {}, "No console page at ", h("code", {}, path), "."));
    document.title = "Not found · jobsched";
    return;
  }
  const match = path.match(route.pattern);
  view.replaceChildren(h("p", { class: "muted" }, "Loading…"));
  try {
    const stop = await route.page.render(view, { params, args: match.slice(1), isCurrent: () => mine === generation });
    if (mine === generation) stopCurrent = stop || null;
    else if (stop) stop();
  } catch (err) {
    if (mine !== generation) return;
    view.replaceChildren(h("h1", {}, "Could not load this page"), h("p", { class: "error-text", role: "alert" }, err.message));
  }
  if (mine === generation) {
    const heading = view.querySelector("h1");
    document.title = `${heading ? heading.textContent : "Console"} · jobsched`;
  }
}

// Asks for an API key (AUTH=required). The key is kept in sessionStorage: for this tab, until it closes.
function showLogin(reason) {
  if (stopCurrent) stopCurrent();
  stopCurrent = null;
  generation++;
  const view = document.getElementById("view");
  const input = h("input", { id: "api-key", name: "key", type: "password", autocomplete: "off", required: true });
  view.replaceChildren(
    h("h1", {}, "API key needed"),
    h("p", {}, "This API asks for a key. It is kept for this browser tab only, until the tab is closed."),
    reason ? h("p", { class: "error-text", role: "alert" }, reason) : null,
    h(
      "form",
      {
        class: "filters",
        onsubmit: (event) => {
          event.preventDefault();
          rememberKey(input.value.trim());
          start();
        },
      },
      h("label", { for: "api-key" }, "API key", input),
      h("button", { type: "submit" }, "Use this key"),
    ),
  );
  document.title = "API key needed · jobsched";
  input.focus();
}

function showSession() {
  const { auth, tenantId, role } = session();
  const banner = document.getElementById("banner");
  banner.hidden = auth !== "off";
  banner.textContent =
    auth === "off" ? "AUTH=off: this API checks no key. Anyone who can reach it can read and change every tenant's jobs." : "";
  const bar = document.getElementById("session");
  if (auth === "off") {
    bar.replaceChildren();
    return;
  }
  const forget = () => {
    forgetKey();
    location.reload();
  };
  bar.replaceChildren(
    h("span", { id: "whoami" }, `${tenantId === null ? "every tenant" : tenantId} · ${role}`),
    h("button", { class: "secondary", type: "button", onclick: forget }, "Forget key"),
  );
}

async function start() {
  try {
    setSession(await api("/session"));
  } catch (err) {
    if (err.status === 401) showLogin(err.message === "HTTP 401" ? "" : err.message);
    else document.getElementById("view").replaceChildren(h("h1", {}, "The API did not answer"), h("p", { class: "error-text" }, err.message));
    return;
  }
  showSession();
  await render();
}

window.addEventListener("jobsched:unauthorized", (event) => showLogin(event.detail));
window.addEventListener("hashchange", () => {
  clearNotice();
  render().then(() => document.getElementById("view").focus({ preventScroll: true }));
});
start();
