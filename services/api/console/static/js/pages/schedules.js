// Schedules: one tenant's recurring templates with their schedule in words and when they fire next.

import { api, meta } from "../api.js";
import { badge, h, link, show, table, tenantPicker, time } from "../ui.js";
import { scheduleInWords } from "../schedule-words.js";

export const TEMPLATES_SHOWN = 200;

export async function render(view, { params, isCurrent }) {
  const { tenants } = await meta();
  const tenant = params.get("tenantId") || tenants[0] || "";
  const templates = tenant
    ? await api("/jobs", { params: { tenantId: tenant, kind: "template", limit: TEMPLATES_SHOWN } })
    : [];
  if (!isCurrent()) return;
  const rows = templates.map((job) =>
    h(
      "tr",
      { dataset: { jobId: job.id } },
      h("td", {}, link(`#/jobs/${job.id}`, job.idempotencyKey)),
      h("td", {}, job.jobType),
      h("td", {}, h("code", {}, job.cron || `every ${job.interval}`), job.timezone ? ` ${job.timezone}` : ""),
      h("td", { dataset: { words: "" } }, scheduleInWords(job) || ""),
      h("td", {}, badge(job.status)),
      h("td", {}, job.status === "pending" ? time(job.scheduledAt) : ""),
    ),
  );
  show(view, [
    h("h1", {}, "Schedules"),
    tenantPicker(tenants, tenant, { allowAll: false, route: "/schedules" }),
    templates.length
      ? table(["Template", "Type", "Schedule", "In words", "Status", "Next fire"], rows)
      : h("p", { class: "muted", id: "empty" }, tenant ? "No recurring templates for this tenant." : "No jobs yet."),
  ]);
}
