// Batches: one tenant's, newest first, each with its status, its progress (members ended of its total), its
// members counted by status, and links to its own page (batch.js) and its callbacks' jobs.

import { api, meta } from "../api.js";
import { badge, h, link, show, table, tenantPicker, time } from "../ui.js";
import { progressShare } from "../progress.js";
import { countsInWords } from "./workflows.js";

export const BATCHES_SHOWN = 50;
const ENDED = ["completed", "dlq", "cancelled"];

export async function render(view, { params, isCurrent }) {
  const { tenants } = await meta();
  const tenant = params.get("tenantId") || tenants[0] || "";
  const before = params.get("before") || "";
  // One more than a page tells whether there are older batches.
  const found = tenant ? await api("/batches", { params: { tenantId: tenant, limit: BATCHES_SHOWN + 1, before } }) : [];
  if (isCurrent()) show(view, content(tenants, tenant, found.slice(0, BATCHES_SHOWN), found.length > BATCHES_SHOWN, before));
}

export function progress(batch) {
  const ended = ENDED.reduce((sum, status) => sum + (batch.counts[status] || 0), 0);
  const share = batch.total ? progressShare({ done: ended, total: batch.total }) : null;
  if (!share) return h("span", { class: "muted" }, "no members yet");
  const label = `progress-${batch.id}`;
  return h(
    "div",
    { class: "progress-bar" },
    h("progress", { value: share.value, max: share.max, "aria-label": `${batch.name || batch.idempotencyKey}: ended`, "aria-valuetext": share.text, id: label }, share.text),
    h("span", { class: "progress-text" }, share.text),
  );
}

export function callbacks(batch) {
  return Object.entries(batch.callbacks).flatMap(([name, jobId], i) => [i ? " " : "", link(`#/jobs/${jobId}`, name)]);
}

function content(tenants, tenant, batches, more, before) {
  const rows = batches.map((b) =>
    h(
      "tr",
      { dataset: { batchId: b.id } },
      h("td", {}, link(`#/batches/${b.id}`, b.name || b.idempotencyKey), h("div", { class: "muted" }, h("code", {}, b.id))),
      h("td", {}, badge(b.status)),
      h("td", { dataset: { progress: "" } }, progress(b)),
      h("td", { dataset: { counts: "" } }, countsInWords(b.counts)),
      h("td", {}, callbacks(b)),
      h("td", {}, time(b.createdAt)),
    ),
  );
  const page = (cursor) => `#/batches?${new URLSearchParams({ tenantId: tenant, ...cursor })}`;
  return [
    h("h1", {}, "Batches"),
    tenantPicker(tenants, tenant, { allowAll: false, route: "/batches" }),
    batches.length
      ? table(["Batch", "Status", "Progress", "Members", "Callbacks", "Created"], rows, { stack: true })
      : h("p", { class: "muted", id: "empty" }, tenant ? "No batches for this tenant." : "No jobs yet."),
    h(
      "nav",
      { class: "pager", "aria-label": "Pages" },
      more ? link(page({ before: batches[batches.length - 1].id }), "Older →") : null,
      before ? link(page({}), "Newest") : null,
    ),
  ];
}
