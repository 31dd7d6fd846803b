// History: minute by minute over the last hour, 6 hours or day, of one job type or all, of one tenant or (no key,
// or an admin's) every tenant: jobs completed and attempts failed, start lateness, jobs waiting and running. Drawn
// as SVG from GET /history (the stores' per-minute counters), refreshed in place.

import { api, meta } from "../api.js";
import { h, refreshEvery, show, svg } from "../ui.js";
import { navigate } from "../router.js";
import { session } from "../session.js";

const REFRESH_MS = 15000;
const RANGES = { "1h": "Last hour", "6h": "Last 6 hours", "24h": "Last day" };
const SIZE = { width: 1000, height: 190, left: 56, right: 12, top: 10, bottom: 24 };

export async function render(view, { params, isCurrent }) {
  const { tenants, jobTypes } = await meta();
  const { auth, tenantId: own, role } = session();
  const everyTenant = own === null || role === "admin"; // no key, or an admin's: every tenant's sums may be read
  const filters = {
    tenantId: params.get("tenantId") || (everyTenant ? "" : own),
    jobType: params.get("jobType") || "",
    range: RANGES[params.get("range")] ? params.get("range") : "1h",
  };
  // A key's request that names no tenant reads its own: an admin asks for every tenant with a blank one.
  const path = auth !== "off" && !filters.tenantId ? "/history?tenantId=" : "/history";
  return refreshEvery(view, REFRESH_MS, async (stopped) => {
    const data = await api(path, { params: filters });
    if (stopped() || !isCurrent()) return;
    show(view, [h("h1", {}, "History"), form(tenants, jobTypes, filters, everyTenant), charts(data)]);
  });
}

function form(tenants, jobTypes, filters, everyTenant) {
  const go = (change) => navigate("/history", { ...filters, ...change });
  const select = (id, label, options, value, key) =>
    h(
      "label",
      { for: id },
      label,
      h(
        "select",
        { id, name: key, onchange: (event) => go({ [key]: event.target.value }) },
        options.map(([v, text]) => h("option", { value: v, selected: v === value }, text)),
      ),
    );
  const tenantOptions = [...(everyTenant ? [["", "All tenants"]] : []), ...tenants.map((t) => [t, t])];
  if (filters.tenantId && !tenants.includes(filters.tenantId)) tenantOptions.push([filters.tenantId, filters.tenantId]);
  return h(
    "form",
    { class: "filters", onsubmit: (e) => e.preventDefault() },
    select("tenant", "Tenant", tenantOptions, filters.tenantId, "tenantId"),
    select("job-type", "Job type", [["", "All types"], ...jobTypes.map((t) => [t, t])], filters.jobType, "jobType"),
    select("range", "Range", Object.entries(RANGES), filters.range, "range"),
  );
}

function charts(data) {
  const sum = (values) => values.reduce((total, v) => total + (v || 0), 0);
  const times = data.completed.map((_, i) => new Date(Date.parse(data.since) + i * data.stepSeconds * 1000));
  return [
    chart("outcomes", "Completed and failed, per minute", times, [
      { name: "completed", label: `completed (${sum(data.completed)})`, values: data.completed },
      { name: "failed", label: `failed attempts (${sum(data.failed)})`, values: data.failed },
      { name: "dlq", label: `dead-lettered (${sum(data.dlq)})`, values: data.dlq },
    ]),
    chart(
      "lateness",
      "Start lateness (started − due), at most, in ms",
      times,
      [
        { name: "p50", label: "p50", values: data.latenessP50Ms },
        { name: "p99", label: "p99", values: data.latenessP99Ms },
      ],
      { log: true },
    ),
    chart("backlog", "Due and waiting, running (sampled once a minute)", times, [
      { name: "waiting", label: "due and waiting", values: data.waiting },
      { name: "running", label: "running", values: data.running },
    ]),
    h(
      "p",
      { class: "muted", id: "refreshed" },
      `${sum(data.started)} attempts started from ${clock(times[0])} to ${clock(times[times.length - 1])} UTC; refreshes every ${REFRESH_MS / 1000} s.`,
    ),
  ];
}

// One chart: a line per series over the minutes, the y axis from 0 (or 1 ms, on a log scale) to the largest
// value, the first, middle and last minute under it. A minute without a value (no start: no lateness) breaks its
// line, and a value alone between two such minutes is a dot. Every series' values are in data-values, and the
// legend names each with its total.
function chart(id, title, times, series, { log = false } = {}) {
  const { width, height, left, right, top, bottom } = SIZE;
  const plotW = width - left - right;
  const plotH = height - top - bottom;
  const all = series.flatMap((s) => s.values.filter((v) => v !== null));
  const max = Math.max(log ? 10 : 1, ...all);
  const scale = log ? (v) => Math.log10(Math.max(v, 1)) / Math.log10(max) : (v) => v / max;
  const x = (i) => left + (times.length > 1 ? (i * plotW) / (times.length - 1) : plotW / 2);
  const y = (v) => top + plotH - scale(v) * plotH;
  const lines = series.map((s) => {
    let d = "";
    let pen = "M";
    s.values.forEach((v, i) => {
      if (v === null) {
        pen = "M";
        return;
      }
      d += `${pen}${x(i).toFixed(1)},${y(v).toFixed(1)} `;
      pen = "L";
    });
    const alone = (i) => s.values[i] !== null && s.values[i - 1] == null && s.values[i + 1] == null;
    const dots = s.values.flatMap((v, i) => (alone(i) ? [svg("circle", { class: `dot ${s.name}`, cx: x(i), cy: y(v), r: 3 })] : []));
    return [svg("path", { class: `line ${s.name}`, d: d.trim(), "data-series": s.name, "data-values": s.values.join(",") }), ...dots];
  });
  const ticks = [0, Math.floor((times.length - 1) / 2), times.length - 1].map((i) =>
    svg("text", { class: "tick", x: x(i), y: height - 6, "text-anchor": i === 0 ? "start" : i === times.length - 1 ? "end" : "middle" }, clock(times[i])),
  );
  const axis = [
    svg("line", { class: "axis", x1: left, y1: top + plotH, x2: width - right, y2: top + plotH }),
    svg("line", { class: "grid", x1: left, y1: top, x2: width - right, y2: top }),
    svg("text", { class: "tick", x: left - 6, y: top + 4, "text-anchor": "end" }, String(max)),
    svg("text", { class: "tick", x: left - 6, y: top + plotH + 4, "text-anchor": "end" }, log ? "1" : "0"),
  ];
  const legend = h(
    "ul",
    { class: "legend" },
    series.map((s) => h("li", { class: s.name, dataset: { series: s.name } }, h("span", { class: "swatch", "aria-hidden": "true" }), s.label)),
  );
  return h(
    "section",
    { class: "panel chart", id, dataset: { chart: id } },
    h("h2", {}, title),
    legend,
    svg(
      "svg",
      { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": `${title}: ${series.map((s) => s.label).join(", ")}` },
      ...axis,
      ...lines.flat(),
      ...ticks,
    ),
  );
}

function clock(moment) {
  return moment.toISOString().slice(11, 16);
}
