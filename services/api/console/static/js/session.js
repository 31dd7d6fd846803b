// Who the console acts as: the API key kept for this browser session only (sessionStorage: gone when the tab
// closes, never sent anywhere but this API), and what GET /session says the key may do.

const STORAGE_KEY = "jobsched.apiKey";
let current = { auth: "off", role: "admin", tenantId: null };

export function apiKey() {
  return sessionStorage.getItem(STORAGE_KEY);
}

export function rememberKey(key) {
  sessionStorage.setItem(STORAGE_KEY, key);
}

export function forgetKey() {
  sessionStorage.removeItem(STORAGE_KEY);
}

export function setSession(session) {
  current = session;
}

export function session() {
  return current;
}

// Readers see everything their key may read and no button that would change anything.
export function canWrite() {
  return current.role === "writer" || current.role === "admin";
}
