// Jobs: one tenant's jobs, newest first, filtered by status and type, paged by cursor (never by offset).

import { api, cursorOf, meta } from "../api.js";
import { badge, h, link, table, time } from "../ui.js";
import { navigate } from "../router.js";

export const PAGE_SIZE = 50;

export async function render(view, { params }) {
  const { tenants, jobTypes, statuses } = await meta();
  const tenant = params.get("tenantId") || tenants[0] || "";
  const filters = {
    tenantId: tenant,
    status: params.get("status") || "",
    jobType: params.get("jobType") || "",
    templateId: params.get("templateId") || "",
  };
  const before = params.get("before");
  const after = params.get("after");
  const form = filterForm(tenants, jobTypes, statuses, filters);
  if (!tenant) {
    view.replaceChildren(h("h1", {}, "Jobs"), form, h("p", { class: "muted" }, "No jobs yet."));
    return;
  }
  // One more than a page tells whether there is a page beyond.
  const rows = await api("/jobs", { params: { ...filters, limit: PAGE_SIZE + 1, before, after } });
  const more = rows.length > PAGE_SIZE;
  const page = after ? rows.slice(rows.length > PAGE_SIZE ? 1 : 0) : rows.slice(0, PAGE_SIZE);
  const hasNewer = Boolean(before) || (after && more);
  const hasOlder = Boolean(after) || (!after && more);

  const body = page.map((job) =>
    h(
      "tr",
      { dataset: { jobId: job.id } },
      h("td", {}, link(`#/jobs/${job.id}`, h("code", {}, job.id))),
      // A key can be long (a UUID or two): clipped here, whole in its title and on the job's page.
      h("td", {}, h("span", { class: "clip key", title: job.idempotencyKey, dataset: { key: "" } }, job.idempotencyKey)),
      h("td", {}, job.jobType),
      h("td", {}, badge(job.status), job.cron || job.interval ? [" ", badge("template")] : null),
      h("td", {}, time(job.createdAt)),
      h("td", {}, time(job.scheduledAt)),
      h("td", { class: "num", title: "attempts started" }, job.runs === undefined ? "" : String(job.runs)),
      h("td", {}, job.lastError ? h("span", { class: "clamp error-text", title: job.lastError }, job.lastError) : ""),
    ),
  );
  const pager = h(
    "nav",
    { class: "pager", "aria-label": "Pages" },
    hasNewer && page.length ? link(pageHref(filters, { after: cursorOf(page[0]) }), "← Newer") : null,
    hasOlder && page.length ? link(pageHref(filters, { before: cursorOf(page[page.length - 1]) }), "Older →") : null,
    before || after ? link(pageHref(filters, {}), "Newest") : null,
  );
  view.replaceChildren(
    h("h1", {}, "Jobs"),
    form,
    filters.templateId
      ? h("p", {}, "Runs of template ", link(`#/jobs/${filters.templateId}`, h("code", {}, filters.templateId)), " · ", link(pageHref({ ...filters, templateId: "" }, {}), "all jobs"))
      : "",
    page.length
      ? table(["Id", "Key", "Type", "Status", "Created", "Scheduled", "Runs", "Last error"], body)
      : h("p", { class: "muted", id: "empty" }, "No jobs match these filters."),
    pager,
  );
}

function pageHref(filters, cursor) {
  const query = new URLSearchParams(Object.entries({ ...filters, ...cursor }).filter(([, v]) => v));
  return `#/jobs?${query}`;
}

function filterForm(tenants, jobTypes, statuses, filters) {
  const choose = (name, label, values, current, any) =>
    h(
      "label",
      {},
      label,
      h(
        "select",
        { name, id: `filter-${name}` },
        any ? h("option", { value: "" }, any) : null,
        values.map((v) => h("option", { value: v, selected: v === current }, v)),
      ),
    );
  const form = h(
    "form",
    {
      class: "filters",
      role: "search",
      onsubmit: (event) => {
        event.preventDefault();
        navigate("/jobs", Object.fromEntries(new FormData(event.target)));
      },
      onchange: (event) => event.currentTarget.requestSubmit(),
    },
    choose("tenantId", "Tenant", tenants.length ? tenants : [filters.tenantId].filter(Boolean), filters.tenantId, null),
    choose("status", "Status", statuses, filters.status, "Any status"),
    choose("jobType", "Job type", jobTypes, filters.jobType, "Any type"),
    h("button", { type: "submit", class: "secondary" }, "Apply"),
  );
  return form;
}
