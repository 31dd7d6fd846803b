// Where the console is: the part of the URL after '#', as a path and query parameters.

export function parseHash(hash = location.hash) {
  const raw = hash.replace(/^#/, "") || "/";
  const [path, query = ""] = raw.split("?", 2);
  return { path, params: new URLSearchParams(query) };
}

// Go to a console page; parameters without a value are left out. Re-renders when already there.
export function navigate(path, params = {}) {
  const query = new URLSearchParams(Object.entries(params).filter(([, v]) => v !== undefined && v !== null && v !== ""));
  const target = `#${path}${query.toString() ? `?${query}` : ""}`;
  if (location.hash === target) window.dispatchEvent(new HashChangeEvent("hashchange"));
  else location.hash = target;
}
