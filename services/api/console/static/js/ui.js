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

const SVG = "http://www.w3.org/2000/svg";

// An SVG element, as `h` makes HTML ones (text children only as text nodes).
export function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

// Draws a page now and again every `ms`, in place: `draw(stopped)` fetches and shows it unless `stopped()` (the
// operator left the page meanwhile). A failed refresh says so in the page's #refreshed line and the next one tries
// again. Returns what stops it, for the router.
export async function refreshEvery(view, ms, draw) {
  let timer = null;
  let stopped = false;
  const isStopped = () => stopped;
  await draw(isStopped);
  const loop = async () => {
    try {
      await draw(isStopped);
    } catch (err) {
      const stamp = view.querySelector("#refreshed");
      if (stamp) stamp.textContent = `Refresh failed: ${err.message}`;
    }
    if (!stopped) timer = setTimeout(loop, ms);
  };
  timer = setTimeout(loop, ms);
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
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

// `stack`: at phone width each row becomes a block of labelled cells (the labels are the column headers), for
// tables too wide to scroll through comfortably.
export function table(headers, rows, { caption, stack = false } = {}) {
  const head = h("tr", {}, headers.map((t) => (typeof t === "string" ? h("th", { scope: "col" }, t) : t)));
  if (stack) {
    for (const row of rows) {
      [...row.children].forEach((cell, i) => {
        if (typeof headers[i] === "string" && headers[i]) cell.dataset.label = headers[i];
      });
    }
  }
  return h(
    "div",
    { class: stack ? "table-wrap stack" : "table-wrap" },
    h("table", {}, caption ? h("caption", { class: "muted" }, caption) : null, h("thead", {}, head), h("tbody", {}, rows)),
  );
}

export function time(iso) {
  if (!iso) return "";
  const moment = new Date(iso);
  // Said on the page, not only in a tooltip: beside a schedule's "03:30 (Europe/Berlin)" a bare time reads as local.
  return h("time", { datetime: iso, title: iso }, `${moment.toISOString().replace("T", " ").slice(0, 19)} UTC`);
}

// A schedule's time in the schedule's own zone, with UTC beside it: "2026-12-06 02:00 Europe/Paris (01:00 UTC)", the
// UTC date too when it is another day, seconds only when there are any. UTC alone ("2026-12-06 01:00 UTC") when
// the schedule names no zone, names UTC, or names one this browser's Intl does not know. In a narrow column the
// UTC part goes to a line of its own.
export function zonedTime(iso, zone) {
  if (!iso) return "";
  const utc = wallClock(iso, "UTC");
  const local = zone && !UTC_NAMES.test(zone) ? wallClock(iso, zone) : null;
  const seconds = utc.second !== "00";
  const clock = (p) => `${p.hour}:${p.minute}${seconds ? `:${p.second}` : ""}`;
  if (!local) return h("time", { datetime: iso, title: iso }, `${utc.date} ${clock(utc)} UTC`);
  const inUtc = utc.date === local.date ? clock(utc) : `${utc.date} ${clock(utc)}`;
  return h(
    "time",
    { datetime: iso, title: iso, class: "zoned" },
    h("span", {}, `${local.date} ${clock(local)} ${zone}`),
    " ",
    h("span", { class: "muted" }, `(${inUtc} UTC)`),
  );
}

const UTC_NAMES = /^(Etc\/)?(UTC|UCT|Universal|Zulu|GMT)$/i;
const clocks = new Map();

// The date and the time of day at `iso` on the clocks of `zone`; null for a zone Intl does not know.
function wallClock(iso, zone) {
  if (!clocks.has(zone)) {
    let format = null;
    try {
      format = new Intl.DateTimeFormat("en-CA", {
        timeZone: zone,
        year: "numeric",
        month: "2-digit",
        day: "2-digit",
        hour: "2-digit",
        minute: "2-digit",
        second: "2-digit",
        hourCycle: "h23",
      });
    } catch {
      // RangeError: a zone name the API took (from its own tz database) that this browser's does not have.
    }
    clocks.set(zone, format);
  }
  const format = clocks.get(zone);
  if (!format) return null;
  const parts = Object.fromEntries(format.formatToParts(new Date(iso)).map((part) => [part.type, part.value]));
  return { date: `${parts.year}-${parts.month}-${parts.day}`, hour: parts.hour, minute: parts.minute, second: parts.second };
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

// Asks before an action, optionally for one line of text too (`input`: its label). Resolves to the text (""
// when there is no field) on Confirm, and to null on Escape or Cancel.
export function confirmAction(text, confirmLabel, { danger = false, input = null } = {}) {
  const dialog = document.getElementById("confirm");
  const ok = document.getElementById("confirm-ok");
  const field = document.getElementById("confirm-field");
  const box = document.getElementById("confirm-input");
  document.getElementById("confirm-text").textContent = text;
  document.getElementById("confirm-field-label").textContent = input || "";
  field.hidden = !input;
  box.value = "";
  // Enter in the field means Confirm (the form's own default button would be the first one: Cancel).
  box.onkeydown = (event) => {
    if (event.key === "Enter") {
      event.preventDefault();
      dialog.close("ok");
    }
  };
  ok.textContent = confirmLabel;
  ok.className = danger ? "danger" : "";
  dialog.returnValue = "";
  // showModal focuses the dialog's autofocus element, else its first button (Cancel): named here, so that no
  // later focus step of the browser can move a keyboard user's Enter from Confirm (or the field) to Cancel.
  const first = input ? box : ok;
  for (const element of [ok, box]) element.autofocus = element === first;
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok" ? (input ? box.value.trim() : "") : null), {
      once: true,
    });
    dialog.showModal();
    first.focus();
  });
}

// Runs an action after confirmation (`run` gets the text asked for, if any), refreshes the page, then reports
// the outcome (so what the notice says is what the page shows); a refusal shows the API's text.
export async function act({ question, label, run, done, refresh, danger = false, input = null }) {
  const answer = await confirmAction(question, label, { danger, input });
  if (answer === null) return;
  let message;
  try {
    const result = await run(answer);
    message = [typeof done === "function" ? done(result) : done, "ok"];
  } catch (err) {
    message = [`${label} refused: ${err.message}`, "error"];
  }
  try {
    if (refresh) await refresh();
  } finally {
    notify(...message);
    // The refresh replaced the button that had the focus: a keyboard user goes on from the top of the page
    // content, not from the start of the document.
    if (!document.activeElement || document.activeElement === document.body) {
      document.getElementById("view").focus({ preventScroll: true });
    }
  }
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
