// One batch: its status, its progress, its callbacks' jobs, and its members listed by status (each a link to its
// job) in pages, of one status when one is chosen. Refreshed every few seconds until the batch has fired.

import { api } from "../api.js";
import { navigate } from "../router.js";
import { badge, h, link, show, table, time } from "../ui.js";
import { callbacks, progress } from "./batches.js";
import { countsInWords } from "./workflows.js";

export const MEMBERS_SHOWN = 100;
const REFRESH_MS = 3000;
const FIRED = new Set(["succeeded", "failed"]);

export async function render(view, { args: [batchId], params, isCurrent }) {
  const status = params.get("status") || "";
  const after = params.get("after") || "";
  let timer = null;
  const refresh = async (first = false) => {
    const [batch, members] = await Promise.all([
      api(`/batches/${batchId}`),
      api(`/batches/${batchId}/jobs`, { params: { limit: MEMBERS_SHOWN, status, after } }),
    ]);
    if (!isCurrent()) return;
    // A refresh waits while the operator is choosing a status: the rebuilt select would close under them.
    if (first || document.activeElement?.id !== "member-status") show(view, content(batch, members, status, after));
    clearTimeout(timer);
    if (!FIRED.has(batch.status)) timer = setTimeout(() => refresh().catch(() => {}), REFRESH_MS);
  };
  await refresh(true);
  return () => clearTimeout(timer);
}

function content(batch, members, status, after) {
  const field = (name, ...value) => [h("dt", {}, name), h("dd", { dataset: { field: name } }, ...value)];
  const rows = members.jobs.map((m) =>
    h(
      "tr",
      { dataset: { member: m.jobId } },
      h("td", {}, link(`#/jobs/${m.jobId}`, h("code", {}, m.jobId))),
      h("td", {}, badge(m.status)),
    ),
  );
  const page = (cursor) => `#/batches/${batch.id}?${new URLSearchParams(Object.entries({ status, ...cursor }).filter(([, v]) => v))}`;
  return [
    h("h1", {}, "Batch ", batch.name ? `${batch.name} ` : "", badge(batch.status)),
    h(
      "dl",
      { class: "fields" },
      ...field("id", h("code", {}, batch.id)),
      ...field("idempotencyKey", batch.idempotencyKey),
      ...field("tenantId", batch.tenantId),
      ...field("createdAt", time(batch.createdAt)),
      ...field("sealed", batch.sealed ? "yes: no member can be added" : "no: members may still be added"),
      ...(batch.firedAt ? field("firedAt", time(batch.firedAt)) : []),
      ...field("callbacks", ...(Object.keys(batch.callbacks).length ? callbacks(batch) : ["none"])),
      ...field("progress", progress(batch)),
      ...field("members", `${batch.total}: ${countsInWords(batch.counts)}`),
    ),
    h("h2", {}, "Members"),
    statusFilter(batch, status),
    rows.length
      ? table(["Job", "Status"], rows, { stack: true })
      : h("p", { class: "muted", id: "empty" }, status ? `No ${status} members.` : "No members yet."),
    h(
      "nav",
      { class: "pager", "aria-label": "Pages" },
      members.next ? link(page({ after: members.next }), "More →") : null,
      after ? link(page({}), "First page") : null,
    ),
  ];
}

// The statuses its members are in, each with how many (and the one chosen, though none is left in it): choosing
// one lists those members only.
function statusFilter(batch, current) {
  const counts = current && !(current in batch.counts) ? { ...batch.counts, [current]: 0 } : batch.counts;
  const select = h(
    "select",
    { id: "member-status", name: "status", onchange: (event) => navigate(`/batches/${batch.id}`, { status: event.target.value }) },
    h("option", { value: "" }, "Any status"),
    Object.entries(counts)
      .sort()
      .map(([status, n]) => h("option", { value: status, selected: status === current }, `${status} (${n})`)),
  );
  return h("form", { class: "filters", onsubmit: (e) => e.preventDefault() }, h("label", { for: "member-status" }, "Status", select));
}
