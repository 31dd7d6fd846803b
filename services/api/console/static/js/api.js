import { apiKey } from "./session.js";

// The console's client of the JSON API. Paths are resolved against the folder above /ui/, so the console
// works wherever the API is mounted. Every failure becomes an ApiError carrying the API's own error text.

const API_ROOT = new URL("../", document.baseURI.split("#")[0]);

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.name = "ApiError";
    this.status = status;
  }
}

export function apiUrl(path, params = {}) {
  const url = new URL(path.replace(/^\//, ""), API_ROOT);
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "") url.searchParams.set(key, String(value));
  }
  return url;
}

export async function api(path, { method = "GET", params = {}, body } = {}) {
  const headers = { Accept: "application/json" };
  const key = apiKey();
  if (key) headers.Authorization = `Bearer ${key}`;
  const init = { method, headers };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(apiUrl(path, params), init);
  } catch (err) {
    throw new ApiError(0, `the API did not answer (${err.message})`);
  }
  const text = await response.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = null;
    }
  }
  if (!response.ok) {
    const message = data && typeof data.error === "string" ? data.error : `HTTP ${response.status}`;
    if (response.status === 401) window.dispatchEvent(new CustomEvent("jobsched:unauthorized", { detail: message }));
    throw new ApiError(response.status, message);
  }
  return data;
}

// The newest-first cursor of a job: what GET /jobs takes in `before` and `after`.
export function cursorOf(job) {
  return `${job.createdAt}_${job.id}`;
}

let metaCache = null;
const META_TTL_MS = 30000;

// Tenants, job types and statuses for the filters, from the overview and GET /job-types; kept for a while so
// paging stays one request.
export async function meta() {
  if (!metaCache || Date.now() - metaCache.at > META_TTL_MS) {
    const [data, listing] = await Promise.all([api("/overview"), api("/job-types")]);
    metaCache = { at: Date.now(), tenants: data.tenants, jobTypes: typeNames(listing, data.byType), statuses: data.statuses };
  }
  return metaCache;
}

// The types the API accepts (GET /job-types: announced by executors, listed in JOB_TYPES, built in), and those
// that still have jobs though nothing serves them any more.
export function typeNames(listing, byType) {
  return [...new Set([...listing.map((type) => type.name), ...Object.keys(byType)])].sort();
}
