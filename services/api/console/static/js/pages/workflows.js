// Workflows: one tenant's, newest first, each with its status and its steps' counts by status.

import { api, meta } from "../api.js";
import { badge, h, link, show, table, tenantPicker, time } from "../ui.js";

export const WORKFLOWS_SHOWN = 50;

export async function render(view, { params, isCurrent }) {
  const { tenants } = await meta();
  const tenant = params.get("tenantId") || tenants[0] || "";
  const before = params.get("before") || "";
  // One more than a page tells whether there are older workflows.
  const found = tenant ? await api("/workflows", { params: { tenantId: tenant, limit: WORKFLOWS_SHOWN + 1, before } }) : [];
  if (isCurrent()) show(view, content(tenants, tenant, found.slice(0, WORKFLOWS_SHOWN), found.length > WORKFLOWS_SHOWN, before));
}

export function countsInWords(counts) {
  return Object.entries(counts)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([status, n]) => `${n} ${status}`)
    .join(", ");
}

function content(tenants, tenant, workflows, more, before) {
  const rows = workflows.map((w) =>
    h(
      "tr",
      { dataset: { workflowId: w.id } },
      h("td", {}, link(`#/workflows/${w.id}`, w.name || w.idempotencyKey), h("div", { class: "muted" }, h("code", {}, w.id))),
      h("td", {}, badge(w.status)),
      h("td", { dataset: { counts: "" } }, `${w.stepCount} steps: ${countsInWords(w.counts)}`),
      h("td", {}, time(w.createdAt)),
    ),
  );
  const page = (cursor) => `#/workflows?${new URLSearchParams({ tenantId: tenant, ...cursor })}`;
  return [
    h("h1", {}, "Workflows"),
    tenantPicker(tenants, tenant, { allowAll: false, route: "/workflows" }),
    workflows.length
      ? table(["Workflow", "Status", "Steps", "Created"], rows, { stack: true })
      : h("p", { class: "muted", id: "empty" }, tenant ? "No workflows for this tenant." : "No jobs yet."),
    h(
      "nav",
      { class: "pager", "aria-label": "Pages" },
      more ? link(page({ before: workflows[workflows.length - 1].id }), "Older →") : null,
      before ? link(page({}), "Newest") : null,
    ),
  ];
}
