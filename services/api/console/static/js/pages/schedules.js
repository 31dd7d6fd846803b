// Schedules: one tenant's recurring templates with their schedule in words, their next fire times, overlap
// policy and paused state, and the actions on them.

import { api, cursorOf, meta } from "../api.js";
import { h, link, show, table, tenantPicker } from "../ui.js";
import { scheduleInWords } from "../schedule-words.js";
import { canWrite } from "../session.js";
import { fireTimes, overlapOf, stateOf, templateButtons, upcoming } from "../schedule-controls.js";

export const TEMPLATES_SHOWN = 50;

export async function render(view, { params, isCurrent }) {
  const { tenants } = await meta();
  const tenant = params.get("tenantId") || tenants[0] || "";
  const before = params.get("before") || "";
  const refresh = async () => {
    // One more than a page tells whether there are older templates.
    const found = tenant
      ? await api("/jobs", { params: { tenantId: tenant, kind: "template", limit: TEMPLATES_SHOWN + 1, before } })
      : [];
    const templates = found.slice(0, TEMPLATES_SHOWN);
    const times = await Promise.all(templates.map(upcoming));
    if (isCurrent()) show(view, content(tenants, tenant, templates, times, found.length > TEMPLATES_SHOWN, before, refresh));
  };
  await refresh();
}

function content(tenants, tenant, templates, times, more, before, refresh) {
  const writer = canWrite();
  const rows = templates.map((job, index) =>
    h(
      "tr",
      { dataset: { jobId: job.id } },
      h("td", {}, link(`#/jobs/${job.id}`, job.idempotencyKey), h("div", { class: "muted" }, job.jobType)),
      h("td", {}, h("code", {}, job.cron || `every ${job.interval}`), job.timezone ? ` ${job.timezone}` : ""),
      h("td", { dataset: { words: "" } }, scheduleInWords(job) || ""),
      h("td", { dataset: { overlap: "" } }, overlapOf(job)),
      h("td", { dataset: { state: "" } }, stateOf(job)),
      h("td", {}, fireTimes(job, times[index])),
      writer ? h("td", {}, h("div", { class: "actions" }, templateButtons(job, refresh))) : null,
    ),
  );
  const headers = ["Template", "Schedule", "In words", "Overlap", "State", "Next fire times"];
  const page = (cursor) => `#/schedules?${new URLSearchParams({ tenantId: tenant, ...cursor })}`;
  return [
    h("h1", {}, "Schedules"),
    tenantPicker(tenants, tenant, { allowAll: false, route: "/schedules" }),
    templates.length
      ? table(writer ? [...headers, "Actions"] : headers, rows, { stack: true })
      : h("p", { class: "muted", id: "empty" }, tenant ? "No recurring templates for this tenant." : "No jobs yet."),
    h(
      "nav",
      { class: "pager", "aria-label": "Pages" },
      more ? link(page({ before: cursorOf(templates[templates.length - 1]) }), "Older →") : null,
      before ? link(page({}), "Newest") : null,
    ),
  ];
}
