"""The API's OpenAPI document (document.py; with AUTH=required, auth.py adds the keys' security)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection
from typing import Any


def document_maker(public_paths: Collection[str] | None) -> Callable[[], dict[str, Any]]:
    """The document as GET /openapi.json serves it, made at the first call and kept: not at every process start,
    which paid some 50 ms of JSON schemas (and these modules' imports) for a document most processes never serve.
    `public_paths`: with AUTH=required, the paths that need no key; None without auth."""

    @functools.cache
    def made() -> dict[str, Any]:
        # Imported here, at the first request: the modules that make the document are not needed before.
        from services.api.openapi.document import openapi_document

        document = openapi_document()
        if public_paths is None:
            return document
        from services.api.openapi.auth import secured

        return secured(document, public_paths)

    return made
