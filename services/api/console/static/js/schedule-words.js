// A schedule in words for the common shapes of cron expressions and intervals; null when there is no short
// way to say it (the page then shows the expression alone).

const DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];
const MACROS = {
  "@hourly": "every hour",
  "@daily": "every day at 00:00",
  "@midnight": "every day at 00:00",
  "@weekly": "every Sunday at 00:00",
  "@monthly": "on day 1 of every month at 00:00",
  "@yearly": "every 1 January at 00:00",
  "@annually": "every 1 January at 00:00",
};
const UNITS = { s: "second", m: "minute", h: "hour", d: "day" };
const number = /^\d+$/;

function clock(hour, minute) {
  return `${hour.padStart(2, "0")}:${minute.padStart(2, "0")}`;
}

function every(count, unit) {
  return Number(count) === 1 ? `every ${unit}` : `every ${Number(count)} ${unit}s`;
}

export function intervalInWords(text) {
  const parts = [...text.matchAll(/(\d+)([smhd])/g)];
  if (!parts.length || parts.map((p) => p[0]).join("") !== text) return null;
  if (parts.length === 1) return every(parts[0][1], UNITS[parts[0][2]]);
  return `every ${parts.map(([, n, u]) => `${Number(n)} ${UNITS[u]}${Number(n) === 1 ? "" : "s"}`).join(" ")}`;
}

export function cronInWords(expression) {
  const text = expression.trim();
  if (MACROS[text]) return MACROS[text];
  const fields = text.split(/\s+/);
  if (fields.length !== 5) return null;
  const [minute, hour, day, month, weekday] = fields;
  const anyDate = day === "*" && month === "*";
  const step = /^\*\/(\d+)$/;
  if (anyDate && weekday === "*") {
    if (minute === "*" && hour === "*") return "every minute";
    if (step.test(minute) && hour === "*") return every(minute.match(step)[1], "minute");
    if (number.test(minute) && hour === "*") return `every hour at minute ${Number(minute)}`;
    if (number.test(minute) && step.test(hour)) return `${every(hour.match(step)[1], "hour")} at minute ${Number(minute)}`;
    if (number.test(minute) && number.test(hour)) return `every day at ${clock(hour, minute)}`;
  }
  if (!number.test(minute) || !number.test(hour)) return null;
  const at = clock(hour, minute);
  if (anyDate && weekday === "1-5") return `every weekday at ${at}`;
  if (anyDate && number.test(weekday) && Number(weekday) <= 7) return `every ${DAYS[Number(weekday) % 7]} at ${at}`;
  if (number.test(day) && month === "*" && weekday === "*") return `on day ${Number(day)} of every month at ${at}`;
  return null;
}

export function scheduleInWords(job) {
  const words = job.cron ? cronInWords(job.cron) : job.interval ? intervalInWords(job.interval) : null;
  if (!words) return null;
  // A time of day is in a zone (UTC unless the template names one); "every 15 minutes" is not.
  return job.cron && /\d\d:\d\d/.test(words) ? `${words} (${job.timezone || "UTC"})` : words;
}
