// What the Schedules page and a template's page show of a schedule and the actions on it: the next fire times
// (the API computes them, as the scheduler does), the overlap policy, the paused state with its note, and
// pause / resume / trigger / backfill, each after a confirmation.

import { api } from "./api.js";
import { act, badge, h, plural, zonedTime } from "./ui.js";
import { canWrite } from "./session.js";

export const FIRE_TIMES_SHOWN = 5;

// The next fire times of a template; none for one that is paused or has ended (nothing will fire).
export async function upcoming(template) {
  if (template.status !== "pending" || template.paused) return [];
  return api(`/jobs/${template.id}/upcoming`, { params: { count: FIRE_TIMES_SHOWN } });
}

// In the template's own time zone, UTC beside it.
export function fireTimes(template, times) {
  if (times.length) {
    return h("ol", { class: "fire-times", dataset: { fireTimes: template.id } }, times.map((t) => h("li", {}, zonedTime(t, template.timezone))));
  }
  const why = template.status !== "pending" ? `none: the template is ${template.status}` : template.paused ? "none while paused" : "none";
  return h("span", { class: "muted", dataset: { fireTimes: template.id } }, why);
}

export function overlapOf(template) {
  return template.overlap || "allow_all";
}

// Where a schedule came from when it is declared (in the code of its handlers, or in a file applied with
// `jobsched schedules apply`): it is changed there, not here.
const DECLARED = { code: "declared in code", file: "declared in a file" };

export function stateOf(template) {
  const declared = DECLARED[template.declaredBy];
  return [
    badge(template.status),
    template.paused ? [" ", badge("paused")] : null,
    declared ? [" ", h("span", { class: "badge declared", dataset: { declared: template.declaredBy } }, declared)] : null,
    template.paused && template.pauseNote ? h("div", { class: "muted", dataset: { pauseNote: "" } }, template.pauseNote) : null,
  ];
}

function button(id, label, onclick, secondary = true) {
  return h("button", { type: "button", class: secondary ? "secondary" : null, dataset: { action: id }, onclick }, label);
}

// Pause or resume, and trigger: nothing for a reader key or a template that has ended (the API would refuse).
export function templateButtons(template, refresh) {
  if (!canWrite() || template.status !== "pending") return [];
  const name = `template ${template.idempotencyKey}`;
  const toggle = template.paused
    ? button("resume", "Resume", () =>
        act({
          question: `Resume ${name}? It continues at its first fire time after now; the times that passed while it was paused do not run.`,
          label: "Resume",
          run: () => api(`/jobs/${template.id}/resume`, { method: "POST", body: {} }),
          done: "Resumed.",
          refresh,
        }),
      )
    : button("pause", "Pause", () =>
        act({
          question: `Pause ${name}? No fire time starts a run until it is resumed.`,
          label: "Pause",
          input: "Note (optional): why",
          run: (note) => api(`/jobs/${template.id}/pause`, { method: "POST", body: note ? { note } : {} }),
          done: "Paused.",
          refresh,
        }),
      );
  const trigger = button("trigger", "Trigger now", () =>
    act({
      question: `Start one run of ${name} now, outside its schedule (decided by its overlap policy, ${overlapOf(template)})?`,
      label: "Trigger",
      run: () => api(`/jobs/${template.id}/trigger`, { method: "POST", body: {} }),
      done: (run) => `Triggered: run ${run.id} is ${run.status}.`,
      refresh,
    }),
  );
  return [toggle, trigger];
}

// The value of a datetime-local field, read as UTC, in RFC 3339 ("" stays "": the API says what is missing).
function utcTime(value) {
  if (!value) return "";
  return `${value}${value.length === 16 ? ":00" : ""}Z`;
}

function localField(date) {
  return date.toISOString().slice(0, 16);
}

// What was last asked to backfill, per template: a refused range stays in the form to be corrected.
const lastRange = new Map();

// Backfill: one run per fire time in [from, to), as if the times had come one after another.
export function backfillForm(template, refresh) {
  if (!canWrite() || template.status !== "pending") return null;
  const now = new Date();
  const range = lastRange.get(template.id) || { from: localField(new Date(now - 3600000)), to: localField(now) };
  const from = h("input", { type: "datetime-local", id: "backfill-from", name: "from", required: true, value: range.from });
  const to = h("input", { type: "datetime-local", id: "backfill-to", name: "to", required: true, value: range.to });
  return h(
    "form",
    {
      class: "backfill",
      "aria-label": "Backfill",
      onsubmit: (event) => {
        event.preventDefault();
        lastRange.set(template.id, { from: from.value, to: to.value });
        const body = { from: utcTime(from.value), to: utcTime(to.value) };
        act({
          question: `Backfill template ${template.idempotencyKey}: one run for each fire time from ${body.from} up to ${body.to}?`,
          label: "Backfill",
          run: () => api(`/jobs/${template.id}/backfill`, { method: "POST", body }),
          done: (r) => `Backfilled: ${plural(r.spawned, "run")} created, ${r.existing} existed already, ${r.skipped} skipped.`,
          refresh,
        });
      },
    },
    h("label", { for: "backfill-from" }, "Backfill from (UTC)", from),
    h("label", { for: "backfill-to" }, "up to (UTC)", to),
    h("button", { type: "submit", class: "secondary" }, "Backfill"),
  );
}
