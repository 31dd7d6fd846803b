// Overview: jobs per type and status, the last hour's outcomes, the DLQ and schedules; refreshed in place.

import { api, typeNames } from "../api.js";
import { h, link, refreshEvery, show, table, tenantPicker } from "../ui.js";

const REFRESH_MS = 5000;
const FINAL = ["completed", "dlq", "cancelled"];

export async function render(view, { params, isCurrent }) {
  const tenant = params.get("tenantId") || "";
  return refreshEvery(view, REFRESH_MS, async (stopped) => {
    const [data, listing] = await Promise.all([api("/overview", { params: { tenantId: tenant } }), api("/job-types")]);
    if (stopped() || !isCurrent()) return;
    show(view, content(data, listing, data.tenantId || tenant));
  });
}

function jobsLink(tenant, filters, text) {
  if (!tenant) return String(text);
  const query = new URLSearchParams({ tenantId: tenant, ...filters });
  return link(`#/jobs?${query}`, String(text));
}

function content(data, listing, tenant) {
  const totals = data.totals || {};
  const active = Object.entries(totals)
    .filter(([status]) => !FINAL.includes(status))
    .reduce((sum, [, count]) => sum + count, 0);
  const dlqHref = tenant ? `#/dlq?tenantId=${encodeURIComponent(tenant)}` : "#/dlq";
  const schedulesHref = tenant ? `#/schedules?tenantId=${encodeURIComponent(tenant)}` : "#/schedules";
  const cards = h(
    "div",
    { class: "cards" },
    card("Dead letters", data.dlq, dlqHref, "dlq"),
    card("Waiting or running", active),
    card("Completed", totals.completed || 0),
    card("Active schedules", data.schedules.active, schedulesHref, "schedules-active"),
    card("Paused schedules", data.schedules.paused, schedulesHref, "schedules-paused"),
  );

  const executors = Object.fromEntries(listing.map((type) => [type.name, type.executors]));
  const limits = Object.fromEntries(listing.map((type) => [type.name, type]));
  const rows = typeNames(listing, data.byType).map((type) => {
    const counts = data.byType[type] || {};
    const recent = data.lastHour[type] || { completed: 0, failed: 0, dlq: 0 };
    return h(
      "tr",
      { dataset: { jobType: type } },
      h("th", { scope: "row" }, jobsLink(tenant, { jobType: type }, type)),
      h("td", { class: "num", dataset: { executors: "" } }, executors[type] || 0),
      limitsCell(limits[type]),
      data.statuses.map((s) =>
        h("td", { class: "num", dataset: { status: s } }, counts[s] ? jobsLink(tenant, { jobType: type, status: s }, counts[s]) : "0"),
      ),
      h("td", { class: "num", dataset: { recent: "completed" } }, recent.completed),
      h("td", { class: "num", dataset: { recent: "failed" } }, recent.failed),
      h("td", { class: "num", dataset: { recent: "dlq" } }, recent.dlq),
    );
  });
  const headers = [
    h("th", { scope: "col" }, "Job type"),
    h("th", { scope: "col", class: "num", title: "executors serving the type now; its jobs wait in pending while there is none" }, "executors"),
    h("th", { scope: "col", title: "limits across the cluster: jobs at once (in all, per tenant, per key) and starts per period" }, "limits"),
    ...data.statuses.map((s) => h("th", { scope: "col", class: "num" }, s)),
    h("th", { scope: "col", class: "num", title: "jobs completed in the last hour" }, "done 1h"),
    h("th", { scope: "col", class: "num", title: "attempts failed, timed out or lost in the last hour" }, "failed 1h"),
    h("th", { scope: "col", class: "num", title: "jobs dead-lettered in the last hour" }, "dlq 1h"),
  ];

  return [
    h("h1", {}, "Overview"),
    tenantPicker(data.tenants, tenant),
    cards,
    h("h2", {}, "Jobs by type and status"),
    table(headers, rows),
    h("p", { class: "muted", id: "refreshed" }, `Updated ${new Date(data.at).toLocaleTimeString()}; refreshes every ${REFRESH_MS / 1000} s.`),
  ];
}

// A type's limits in a few words ("5 at once, 1 per key, 50 per 1s, 1 per 60s per key"), from GET /job-types;
// "none" without.
export function limitsWords(limits) {
  if (!limits) return "none";
  const words = [];
  if (limits.concurrency) words.push(`${limits.concurrency} at once`);
  if (limits.concurrencyPerTenant) words.push(`${limits.concurrencyPerTenant} per tenant`);
  if (limits.concurrencyPerKey) words.push(`${limits.concurrencyPerKey} per key`);
  if (limits.rate) words.push(rateWords(limits.rate));
  if (limits.ratePerKey) words.push(`${rateWords(limits.ratePerKey)} per key`);
  return words.join(", ") || "none";
}

function rateWords(rate) {
  const burst = rate.burst > 1 ? ` (burst ${rate.burst})` : "";
  return `${rate.starts} per ${rate.perSeconds}s${burst}`;
}

function limitsCell(type) {
  const source = type && type.limitsSource;
  const title = source === "api" ? "set by an operator through the API" : source === "code" ? "registered with the handler" : "";
  return h("td", { dataset: { limits: source || "" }, title }, limitsWords(type && type.limits));
}

function card(label, value, href, key) {
  const body = [h("span", { class: "value", dataset: { count: key || label } }, String(value)), h("span", { class: "label" }, label)];
  return h("div", { class: "card" }, href ? h("a", { href }, body) : body);
}
