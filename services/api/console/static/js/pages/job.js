// One job: every field, the payload, its attempts as a timeline, its template or its runs, and its actions.

import { api } from "../api.js";
import { act, badge, duration, h, link, plural, show, table, time, zonedTime } from "../ui.js";
import { scheduleInWords } from "../schedule-words.js";
import { progressBar } from "../progress.js";
import { canWrite } from "../session.js";
import { backfillForm, fireTimes, overlapOf, stateOf, templateButtons, upcoming } from "../schedule-controls.js";

const TIME_FIELDS = new Set(["scheduledAt", "createdAt", "updatedAt", "claimedAt", "queuedAt", "leaseExpiresAt"]);
const RUNS_SHOWN = 20;

export async function render(view, { args: [jobId], isCurrent }) {
  const refresh = async () => {
    const [job, attempts] = await Promise.all([api(`/jobs/${jobId}`), api(`/jobs/${jobId}/executions`)]);
    const isTemplate = Boolean(job.cron || job.interval);
    const [runs, times] = isTemplate
      ? await Promise.all([
          api("/jobs", { params: { tenantId: job.tenantId, templateId: job.id, limit: RUNS_SHOWN } }),
          upcoming(job),
        ])
      : [[], []];
    if (isCurrent()) show(view, content(job, attempts, runs, times, refresh));
  };
  await refresh();
}

function content(job, attempts, runs, times, refresh) {
  const isTemplate = Boolean(job.cron || job.interval);
  const { payload, result, progress, ...fields } = job;
  return [
    h("h1", {}, isTemplate ? "Template " : "Job ", h("code", {}, job.id), " ", badge(job.status)),
    actions(job, refresh),
    isTemplate ? schedulePanel(job, times, refresh) : null,
    h(
      "div",
      { class: "columns" },
      h("section", { class: "panel", "aria-labelledby": "fields-title" }, h("h2", { id: "fields-title" }, "Fields"), fieldList(fields)),
      h(
        "section",
        { class: "panel", "aria-labelledby": "payload-title" },
        h("h2", { id: "payload-title" }, "Payload"),
        h("pre", { class: "json", id: "payload" }, JSON.stringify(payload ?? {}, null, 2)),
        result === undefined ? null : h("h2", { id: "result-title" }, "Result"),
        result === undefined ? null : h("pre", { class: "json", id: "result" }, JSON.stringify(result, null, 2)),
        progress === undefined ? null : h("h2", { id: "progress-title" }, `Progress of attempt ${progress.attempt}`),
        progress === undefined ? null : progressBar(progress.value, "progress-title"),
        progress === undefined
          ? null
          : h("pre", { class: "json", id: "progress", title: `reported at ${progress.reportedAt}` }, JSON.stringify(progress.value, null, 2)),
      ),
    ),
    isTemplate ? runsSection(job, runs) : templateLink(job),
    isTemplate ? null : timeline(attempts),
  ];
}

function fieldList(fields) {
  const rows = Object.entries(fields).flatMap(([key, value]) => [
    h("dt", {}, key),
    h("dd", { dataset: { field: key } }, fieldValue(key, value, fields)),
  ]);
  return h("dl", { class: "fields" }, rows);
}

function fieldValue(key, value, fields) {
  // A template's scheduledAt is its next fire time: in its own time zone too.
  if (key === "scheduledAt" && (fields.cron || fields.interval)) return zonedTime(value, fields.timezone);
  if (TIME_FIELDS.has(key)) return time(value);
  if (key === "templateId") return link(`#/jobs/${value}`, h("code", {}, value));
  if (key === "workflowId") return link(`#/workflows/${value}`, h("code", {}, value));
  if (key === "batchId" || key === "callbackOf") return link(`#/batches/${value}`, h("code", {}, value));
  // The jobs it waits for (or waited for): each a link to that job.
  if (key === "dependsOn") return value.flatMap((id, i) => [i ? ", " : "", link(`#/jobs/${id}`, h("code", {}, id))]);
  if (key === "lastError") return h("span", { class: "error-text" }, value);
  // The trace it was created in: its trace id is what a trace UI (Jaeger, Tempo ...) finds it by.
  if (key === "traceparent") return h("code", { title: value }, `trace ${value.split("-")[1] ?? value}`);
  if (key === "cron" || key === "interval") {
    const words = scheduleInWords(fields);
    return [h("code", {}, String(value)), words ? h("span", { class: "muted" }, ` · ${words}`) : ""];
  }
  if (key === "tenantId") return link(`#/jobs?tenantId=${encodeURIComponent(value)}`, value);
  return typeof value === "object" ? JSON.stringify(value) : String(value);
}

function actions(job, refresh) {
  if (!canWrite()) return null;
  const buttons = [];
  if (["waiting", "pending", "queued"].includes(job.status)) {
    buttons.push(
      h(
        "button",
        {
          class: "danger",
          id: "cancel",
          onclick: () =>
            act({
              question: `Cancel ${job.cron || job.interval ? "template" : "job"} ${job.id}? This cannot be undone.`,
              label: job.cron || job.interval ? "Cancel template" : "Cancel job",
              run: () => api(`/jobs/${job.id}`, { method: "DELETE" }),
              danger: true,
              done: "Cancelled.",
              refresh,
            }),
        },
        job.cron || job.interval ? "Cancel template" : "Cancel job",
      ),
    );
  }
  if (job.status === "dlq") {
    buttons.push(
      h(
        "button",
        {
          id: "redrive",
          onclick: () =>
            act({
              question: `Re-drive job ${job.id}? It goes back to pending with a fresh budget of ${plural(job.maxAttempts, "attempt")}.`,
              label: "Re-drive",
              run: () => api(`/jobs/${job.id}/retry`, { method: "POST" }),
              done: "Re-driven: the job is pending again.",
              refresh,
            }),
        },
        "Re-drive",
      ),
    );
  }
  if (job.cron || job.interval) buttons.push(...templateButtons(job, refresh));
  return buttons.length ? h("div", { class: "actions", role: "group", "aria-label": "Actions" }, buttons) : null;
}

function schedulePanel(job, times, refresh) {
  const words = scheduleInWords(job);
  return h(
    "section",
    { class: "panel schedule", "aria-labelledby": "schedule-title" },
    h("h2", { id: "schedule-title" }, "Schedule"),
    h(
      "dl",
      { class: "fields" },
      h("dt", {}, "Fires"),
      h("dd", { dataset: { words: "" } }, words || h("code", {}, job.cron || `every ${job.interval}`)),
      h("dt", {}, "Overlap"),
      h("dd", { dataset: { overlap: "" } }, overlapOf(job)),
      h("dt", {}, "State"),
      h("dd", { dataset: { state: "" } }, stateOf(job)),
      h("dt", {}, "Next fire times"),
      h("dd", {}, fireTimes(job, times)),
    ),
    backfillForm(job, refresh),
  );
}

function templateLink(job) {
  if (!job.templateId) return null;
  return h("p", {}, "A run of template ", link(`#/jobs/${job.templateId}`, h("code", {}, job.templateId)), ".");
}

function runsSection(job, runs) {
  const rows = runs.map((run) =>
    h(
      "tr",
      {},
      h("td", {}, link(`#/jobs/${run.id}`, h("code", {}, run.id))),
      h("td", {}, zonedTime(run.scheduledAt, job.timezone)),
      h("td", {}, badge(run.status)),
      h("td", { class: "num", title: "attempts started" }, String(run.runs)),
    ),
  );
  return h(
    "section",
    { "aria-labelledby": "runs-title" },
    h("h2", { id: "runs-title" }, "Runs (newest first)"),
    h("p", {}, link(`#/jobs?${new URLSearchParams({ tenantId: job.tenantId, templateId: job.id })}`, "Every run of this template")),
    runs.length ? table(["Run", "Planned for", "Status", "Runs"], rows) : h("p", { class: "muted" }, "No runs yet."),
  );
}

function timeline(attempts) {
  const items = attempts.map((a) =>
    h(
      "li",
      { class: a.outcome, dataset: { attempt: a.attempt } },
      h(
        "div",
        { class: "attempt-head" },
        h("strong", {}, `Attempt ${a.attempt}`),
        badge(a.outcome),
        a.worker ? h("span", { class: "muted" }, "on ", h("code", {}, a.worker)) : null,
      ),
      h(
        "div",
        { class: "muted" },
        a.startedAt ? ["started ", time(a.startedAt)] : "never started",
        a.durationMs !== undefined ? ` · took ${duration(a.durationMs)}` : "",
      ),
      a.error ? h("div", { class: a.outcome === "snoozed" ? "muted" : "error-text" }, a.error) : null,
      a.result === undefined
        ? null
        : h("details", { class: "result" }, h("summary", {}, "Result"), h("pre", { class: "json" }, JSON.stringify(a.result, null, 2))),
      a.traceback
        ? h("details", { class: "traceback" }, h("summary", {}, "Traceback"), h("pre", {}, a.traceback))
        : null,
    ),
  );
  return h(
    "section",
    { "aria-labelledby": "attempts-title" },
    h("h2", { id: "attempts-title" }, "Attempts"),
    items.length ? h("ol", { class: "timeline", id: "attempts" }, items) : h("p", { class: "muted" }, "No attempt yet."),
  );
}
