// A handler's progress report as a bar, when the value says how far along it is. The shapes read (the first
// that fits; anything else is shown as its JSON alone):
//   a number from 0 to 1                          0.3
//   done (or current) of a total, 0 ≤ done ≤ total  {"done": 3, "total": 10}, {"current": 3, "total": 10},
//                                                 {"done": 3, "of": 10} (the shape docs/handlers.md shows)
//   a percentage from 0 to 100                    {"percent": 30}

import { h } from "./ui.js";

const PAIRS = [
  ["done", "total"],
  ["current", "total"],
  ["done", "of"],
];

function isNumber(value) {
  return typeof value === "number" && Number.isFinite(value);
}

// {value, max, text} for a <progress> element, or null when `report` has none of the shapes above.
export function progressShare(report) {
  if (isNumber(report)) return report >= 0 && report <= 1 ? { value: report, max: 1, text: percent(report) } : null;
  if (!report || typeof report !== "object" || Array.isArray(report)) return null;
  for (const [part, whole] of PAIRS) {
    const [done, total] = [report[part], report[whole]];
    if (isNumber(done) && isNumber(total) && total > 0 && done >= 0 && done <= total) {
      return { value: done, max: total, text: `${percent(done / total)} (${done} of ${total})` };
    }
  }
  const pct = report.percent;
  if (isNumber(pct) && pct >= 0 && pct <= 100) return { value: pct, max: 100, text: percent(pct / 100) };
  return null;
}

// Rounded down (100% only when it is all done), past the error of a float: 0.29 * 100 is 28.999999999999996.
function percent(fraction) {
  return `${Math.floor(fraction * 100 + 1e-9)}%`;
}

// The bar and its percentage in text, labelled by the heading `labelledBy`; null when there is no share to show.
export function progressBar(report, labelledBy) {
  const share = progressShare(report);
  if (!share) return null;
  return h(
    "div",
    { class: "progress-bar", id: "progress-bar" },
    h("progress", { value: share.value, max: share.max, "aria-labelledby": labelledBy, "aria-valuetext": share.text }, share.text),
    h("span", { class: "progress-text" }, share.text),
  );
}
