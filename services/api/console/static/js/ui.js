import { navigate } from "./router.js";
import { session } from "./session.js";

// Small DOM helpers. Content is always set as text (never parsed as HTML), so job data cannot inject markup.

export function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") node.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (value === true) node.setAttribute(key, "");
    else node.setAttribute(key, String(value));
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

// Puts `nodes` (nested arrays, nulls skipped) into `view` in place of what it showed.
export function show(view, nodes) {
  view.replaceChildren(...[nodes].flat(Infinity).filter((n) => n !== null && n !== undefined && n !== false));
}

export function badge(text) {
  return h("span", { class: `badge ${text}` }, text);
}

export function link(href, ...children) {
  return h("a", { href }, ...children);
}

export function table(headers, rows, { caption } = {}) {
  const head = h("tr", {}, headers.map((t) => (typeof t === "string" ? h("th", { scope: "col" }, t) : t)));
  return h(
    "div",
    { class: "table-wrap" },
    h("table", {}, caption ? h("caption", { class: "muted" }, caption) : null, h("thead", {}, head), h("tbody", {}, rows)),
  );
}

export function time(iso) {
  if (!iso) return "";
  const moment = new Date(iso);
  return h("time", { datetime: iso, title: `${iso} (UTC)` }, moment.toISOString().replace("T", " ").slice(0, 19));
}

export function duration(ms) {
  if (ms === undefined || ms === null) return "";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60000)} min ${Math.round((ms % 60000) / 1000)} s`;
}

let noticeTimer = null;

// A message for the operator: what an action did, or the API's text when it was refused.
export function notify(text, kind = "ok") {
  const box = document.getElementById("notice");
  box.textContent = text;
  box.className = `notice ${kind}`;
  box.setAttribute("role", kind === "error" ? "alert" : "status");
  box.hidden = false;
  clearTimeout(noticeTimer);
  if (kind === "ok") noticeTimer = setTimeout(() => (box.hidden = true), 8000);
}

export function clearNotice() {
  document.getElementById("notice").hidden = true;
}

// Asks before an action. Resolves true only on Confirm; Escape and Cancel resolve false.
export function confirmAction(text, confirmLabel, { danger = false } = {}) {
  const dialog = document.getElementById("confirm");
  const ok = document.getElementById("confirm-ok");
  document.getElementById("confirm-text").textContent = text;
  ok.textContent = confirmLabel;
  ok.className = danger ? "danger" : "";
  dialog.returnValue = "";
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.showModal();
    ok.focus();
  });
}

// Runs an action after confirmation, reports its outcome and refreshes the page; a refusal shows the API's text.
export async function act({ question, label, run, done, refresh, danger = false }) {
  if (!(await confirmAction(question, label, { danger }))) return;
  try {
    const result = await run();
    notify(typeof done === "function" ? done(result) : done, "ok");
  } catch (err) {
    notify(`${label} refused: ${err.message}`, "error");
  }
  if (refresh) await refresh();
}

export function plural(count, noun) {
  return `${count} ${noun}${count === 1 ? "" : "s"}`;
}


// The tenant whose data a page shows; choosing one reloads the page for it. "All tenants" only without
// authentication: with it, a request that names no tenant is the key's tenant's.
export function tenantPicker(tenants, current, { allowAll = true, route = "/" } = {}) {
  allowAll = allowAll && session().auth === "off";
  const select = h(
    "select",
    {
      id: "tenant",
      name: "tenantId",
      onchange: (event) => navigate(route, { tenantId: event.target.value }),
    },
    allowAll ? h("option", { value: "" }, "All tenants") : null,
    tenants.map((t) => h("option", { value: t, selected: t === current }, t)),
  );
  return h("form", { class: "filters", onsubmit: (e) => e.preventDefault() }, h("label", { for: "tenant" }, "Tenant", select));
}
