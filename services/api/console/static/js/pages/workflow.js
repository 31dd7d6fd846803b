// One workflow: its status, its steps as a graph (each a box coloured by its job's status, a link to the job,
// drawn left to right by how many steps come before it) and as a table, and the cancel action. Refreshed every
// few seconds while a step has not ended.

import { api } from "../api.js";
import { act, badge, h, link, show, svg, table, time } from "../ui.js";
import { canWrite } from "../session.js";
import { countsInWords } from "./workflows.js";

const REFRESH_MS = 3000;
const FINAL = new Set(["succeeded", "failed", "cancelled", "expired"]);
// A graph this large is a wall of boxes: the table says the same, and is searchable.
const GRAPH_MAX_STEPS = 200;
const BOX = { width: 170, height: 40, gapX: 56, gapY: 14, pad: 8 };

export async function render(view, { args: [workflowId], isCurrent }) {
  let timer = null;
  const refresh = async () => {
    const workflow = await api(`/workflows/${workflowId}`);
    if (!isCurrent()) return;
    show(view, content(workflow, refresh));
    clearTimeout(timer);
    if (!FINAL.has(workflow.status)) timer = setTimeout(() => refresh().catch(() => {}), REFRESH_MS);
  };
  await refresh();
  return () => clearTimeout(timer);
}

function content(workflow, refresh) {
  const rows = workflow.steps.map((step) =>
    h(
      "tr",
      { dataset: { step: step.name } },
      h("td", {}, link(`#/jobs/${step.jobId}`, step.name)),
      h("td", {}, step.jobType),
      h("td", {}, step.status ? badge(step.status) : h("span", { class: "muted" }, "deleted")),
      h("td", {}, step.after.join(", ")),
    ),
  );
  return [
    h("h1", {}, "Workflow ", workflow.name ? `${workflow.name} ` : "", badge(workflow.status)),
    actions(workflow, refresh),
    h(
      "dl",
      { class: "fields" },
      h("dt", {}, "id"),
      h("dd", {}, h("code", {}, workflow.id)),
      h("dt", {}, "idempotencyKey"),
      h("dd", {}, workflow.idempotencyKey),
      h("dt", {}, "tenantId"),
      h("dd", {}, workflow.tenantId),
      h("dt", {}, "createdAt"),
      h("dd", {}, time(workflow.createdAt)),
      h("dt", {}, "steps"),
      h("dd", { dataset: { counts: "" } }, `${workflow.stepCount}: ${countsInWords(workflow.counts)}`),
    ),
    h(
      "section",
      { class: "panel", "aria-labelledby": "graph-title" },
      h("h2", { id: "graph-title" }, "Graph"),
      workflow.steps.length <= GRAPH_MAX_STEPS
        ? h("div", { class: "graph" }, graph(workflow.steps))
        : h("p", { class: "muted" }, `${workflow.steps.length} steps: too many to draw; the table below lists them.`),
    ),
    h("h2", {}, "Steps"),
    table(["Step", "Type", "Status", "After"], rows, { stack: true }),
  ];
}

function actions(workflow, refresh) {
  if (!canWrite() || FINAL.has(workflow.status)) return null;
  const cancel = h(
    "button",
    {
      class: "danger",
      id: "cancel-workflow",
      onclick: () =>
        act({
          question: `Cancel every unfinished step of workflow ${workflow.name || workflow.id}? This cannot be undone.`,
          label: "Cancel workflow",
          run: () => api(`/workflows/${workflow.id}`, { method: "DELETE" }),
          danger: true,
          done: "Cancelled.",
          refresh,
        }),
    },
    "Cancel workflow",
  );
  return h("div", { class: "actions", role: "group", "aria-label": "Actions" }, cancel);
}

// Each step in the column of its depth (the longest chain of steps before it), in the order the API gives
// them, which has every step after its parents.
function layout(steps) {
  const depth = new Map();
  const rowsUsed = [];
  const at = new Map();
  for (const step of steps) {
    const d = step.after.reduce((deepest, parent) => Math.max(deepest, (depth.get(parent) ?? -1) + 1), 0);
    depth.set(step.name, d);
    const row = rowsUsed[d] ?? 0;
    rowsUsed[d] = row + 1;
    at.set(step.name, { x: BOX.pad + d * (BOX.width + BOX.gapX), y: BOX.pad + row * (BOX.height + BOX.gapY) });
  }
  const columns = rowsUsed.length;
  const rows = Math.max(...rowsUsed, 1);
  return {
    at,
    width: BOX.pad * 2 + columns * BOX.width + (columns - 1) * BOX.gapX,
    height: BOX.pad * 2 + rows * BOX.height + (rows - 1) * BOX.gapY,
  };
}

function graph(steps) {
  const { at, width, height } = layout(steps);
  const edges = steps.flatMap((step) =>
    step.after.map((parent) => {
      const from = at.get(parent);
      const to = at.get(step.name);
      const [x1, y1, x2, y2] = [from.x + BOX.width, from.y + BOX.height / 2, to.x, to.y + BOX.height / 2];
      const bend = (x2 - x1) / 2;
      return svg("path", { class: "edge", d: `M${x1},${y1} C${x1 + bend},${y1} ${x2 - bend},${y2} ${x2},${y2}` });
    }),
  );
  const nodes = steps.map((step) => {
    const { x, y } = at.get(step.name);
    const status = step.status || "deleted";
    const label = step.name.length > 22 ? `${step.name.slice(0, 21)}…` : step.name;
    return svg(
      "a",
      { href: `#/jobs/${step.jobId}`, "data-step": step.name, "aria-label": `${step.name}: ${status}` },
      svg("title", {}, `${step.name} (${step.jobType}): ${status}`),
      svg("rect", { class: `node ${status}`, x, y, width: BOX.width, height: BOX.height, rx: 6 }),
      svg("text", { x: x + 10, y: y + 17 }, label),
      svg("text", { class: "status", x: x + 10, y: y + 32 }, status),
    );
  });
  return svg(
    "svg",
    { width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": `${steps.length} steps, parents on the left` },
    ...edges,
    ...nodes,
  );
}
