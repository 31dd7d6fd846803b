// Dead letters: grouped by their last error; re-drive one job, a selection, or a whole group.

import { api, meta } from "../api.js";
import { act, h, link, plural, show, table, tenantPicker, time } from "../ui.js";
import { canWrite } from "../session.js";

export async function render(view, { params, isCurrent }) {
  const tenant = params.get("tenantId") || "";
  const { tenants } = await meta();
  const refresh = async () => {
    const groups = await api("/dlq", { params: { tenantId: tenant } });
    if (isCurrent()) show(view, content(groups, tenants, tenant, refresh));
  };
  await refresh();
}

function content(groups, tenants, tenant, refresh) {
  const total = groups.reduce((sum, g) => sum + g.count, 0);
  return [
    h("h1", {}, "Dead letters"),
    tenantPicker(tenants, tenant, { route: "/dlq" }),
    h("p", { class: "muted" }, groups.length ? `${plural(total, "job")} in ${plural(groups.length, "group")} by last error.` : "The DLQ is empty."),
    groups.map((group, index) => groupSection(group, index, tenant, refresh)),
  ];
}

function redriveJobs(ids, refresh, what) {
  return act({
    question: `Re-drive ${what}? ${ids.length === 1 ? "It goes" : "They go"} back to pending with a fresh budget.`,
    label: "Re-drive",
    run: () => api("/dlq/redrive", { method: "POST", body: { jobIds: ids } }),
    done: summary,
    refresh,
  });
}

function summary(result) {
  const refused = result.refused.length ? ` ${result.refused.length} refused: ${result.refused.map((r) => r.error).join("; ")}` : "";
  return `Re-driven ${plural(result.redriven.length, "job")}.${refused}${result.more ? " More are left: re-drive the group again." : ""}`;
}

function groupSection(group, index, tenant, refresh) {
  const titleId = `group-${index}`;
  const writer = canWrite();
  const rows = group.jobs.map((job) =>
    h(
      "tr",
      { dataset: { jobId: job.id } },
      writer ? h("td", {}, h("input", { type: "checkbox", value: job.id, "aria-label": `Select job ${job.id}` })) : null,
      h("td", {}, link(`#/jobs/${job.id}`, h("code", {}, job.id))),
      h("td", {}, job.tenantId),
      h("td", {}, job.jobType),
      h("td", { class: "num", title: "attempts started" }, job.runs === undefined ? "" : String(job.runs)),
      h("td", {}, time(job.updatedAt)),
      writer
        ? h("td", {}, h("button", { class: "secondary", onclick: () => redriveJobs([job.id], refresh, `job ${job.id}`) }, "Re-drive"))
        : null,
    ),
  );
  const headers = ["Job", "Tenant", "Type", "Runs", "Dead-lettered"];
  const section = h(
    "section",
    { class: "group panel", "aria-labelledby": titleId, dataset: { error: group.error } },
    h(
      "div",
      { class: "group-head" },
      h("h3", { id: titleId }, h("span", { class: "error-text" }, group.error || "(no error text)")),
      h("span", { class: "muted" }, `${plural(group.count, "job")} · ${group.jobTypes.join(", ")}`),
    ),
    table(writer ? ["", ...headers, ""] : headers, rows, {
      caption: group.count > group.jobs.length ? `The ${group.jobs.length} most recent of ${group.count}` : null,
    }),
  );
  if (!writer) return section;
  const selected = () => [...section.querySelectorAll("input[type=checkbox]:checked")].map((box) => box.value);
  section.append(
    h(
      "div",
      { class: "actions" },
      h(
        "button",
        {
          class: "secondary",
          dataset: { action: "redrive-selected" },
          onclick: () => {
            const ids = selected();
            if (ids.length) redriveJobs(ids, refresh, `the ${plural(ids.length, "selected job")}`);
          },
        },
        "Re-drive selected",
      ),
      h(
        "button",
        {
          dataset: { action: "redrive-group" },
          onclick: () =>
            act({
              question: `Re-drive all ${group.count} dead letters with this error${tenant ? ` of tenant ${tenant}` : ""}?`,
              label: "Re-drive group",
              run: () =>
                api("/dlq/redrive", { method: "POST", body: { lastError: group.error, ...(tenant ? { tenantId: tenant } : {}) } }),
              done: summary,
              refresh,
            }),
        },
        `Re-drive all ${group.count}`,
      ),
    ),
  );
  return section;
}
