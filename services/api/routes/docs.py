"""GET /openapi.json (the document, with the security of this API's mode) and GET /docs (a page that renders it)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from services.api.context import context
from services.api.http.errors import SafeJSONResponse


async def openapi(request: Request) -> Response:
    return SafeJSONResponse(context(request).openapi())


async def docs(request: Request) -> Response:
    return HTMLResponse(DOCS_HTML)


# Self-contained: the machines this runs on may have no internet, so no CDN-hosted Swagger UI.
DOCS_HTML = """<!doctype html>
<html><head><meta charset="utf-8"><title>jobsched API</title>
<style>body{font:15px system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}
.op{border:1px solid #ccc;border-radius:6px;margin:1rem 0;padding:.5rem 1rem}
.m{font-weight:bold;text-transform:uppercase;margin-right:.5rem}pre{background:#f6f6f6;padding:.5rem;overflow:auto}
</style></head><body><h1>jobsched API</h1><p>Source: <a href="/openapi.json">/openapi.json</a></p><div id="ops"></div>
<script>
fetch('/openapi.json').then(r => r.json()).then(doc => {
  const ops = document.getElementById('ops');
  for (const [path, item] of Object.entries(doc.paths)) for (const [method, op] of Object.entries(item)) {
    const div = document.createElement('div'); div.className = 'op';
    const params = (op.parameters || []).map(p => `${p.name} (${p.in}${p.required ? ', required' : ''})`);
    div.innerHTML = `<div><span class="m">${method}</span><code>${path}</code> — ${op.summary}</div>` +
      (params.length ? `<p>Parameters: ${params.join(', ')}</p>` : '') +
      `<p>Responses: ${Object.entries(op.responses).map(([c, r]) => c + ' ' + r.description).join('; ')}</p>`;
    ops.appendChild(div);
  }
  const pre = document.createElement('pre');
  pre.textContent = JSON.stringify(doc.components.schemas, null, 2);
  ops.appendChild(pre);
});
</script></body></html>
"""

ROUTES = [
    Route("/openapi.json", openapi, methods=["GET"]),
    Route("/docs", docs, methods=["GET"]),
]
