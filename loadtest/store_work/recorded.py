"""`python -m loadtest.store_work.recorded OUT MODULE [ARGS...]`: run `python -m MODULE ARGS` with every command
its MongoDB clients send recorded in OUT (JSON lines), for `loadtest.bench store-work`.

Each line is one command the server answered: when, the process (ROLE, from the module), the command and its
collection, the ids of the jobs it touched (from its filter, its documents and its answer) and, for a write, the
documents it wrote as they are after it (read back by _id on a client of the recorder's own, whose reads carry
RECORDER_COMMENT and are not recorded). The accounting (loadtest/store_work/accounting.py) turns the lines into
work per job; nothing here interprets them.
"""

from __future__ import annotations

import os
import runpy
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

from bson import json_util
from pymongo import MongoClient, monitoring

RECORDER_COMMENT = "store-work-recorder"
WRITES = frozenset({"insert", "update", "delete", "findAndModify"})
READS = frozenset({"find", "getMore", "aggregate", "count", "distinct"})
ID_FIELDS = ("_id", "jobId")  # how a document names its job: its own _id (jobs), or jobId (attempt records)


def ids_in(value: Any) -> Iterator[Any]:
    """The ids a filter's value names: an id, or {"$in": [...]}; nothing for other conditions."""
    if isinstance(value, dict):
        if set(value) == {"$in"}:
            yield from value["$in"]
    elif value is not None:
        yield value


def filter_ids(query: dict[str, Any] | None) -> dict[str, list[Any]]:
    """{field: ids} of the id fields a filter names (at its top level)."""
    return {f: list(ids_in(query[f])) for f in ID_FIELDS if query and f in query}


def doc_job_ids(docs: Iterable[dict[str, Any]]) -> set[str]:
    return {str(d[f]) for d in docs for f in ID_FIELDS if f in d}


def written_by(name: str, command: dict[str, Any], reply: dict[str, Any]) -> tuple[list[dict[str, Any] | None], int]:
    """An update's or findAndModify's queries naming what it wrote, and how many documents it wrote."""
    if name == "update":
        written = int(reply.get("nModified", 0)) + len(reply.get("upserted", []))
        return [u.get("q") for u in command.get("updates", [])], written
    # findAndModify: its answer names the document when the query did not (a claim in claim order)
    found = reply.get("value")
    written = int(reply.get("lastErrorObject", {}).get("n", 0)) if not command.get("remove") else 0
    return [command.get("query") if found is None else {"_id": found["_id"]}], written


class Recorder(monitoring.CommandListener):
    def __init__(self, out: str, role: str, uri: str, database: str) -> None:
        self._out = open(out, "a", buffering=1)  # noqa: SIM115 - open for the process's life, closed at exit
        self._role = role
        self._lock = threading.Lock()
        self._started: dict[tuple[Any, int], tuple[str, dict[str, Any]]] = {}
        self._reader: MongoClient[dict[str, Any]] = MongoClient(uri)
        self._database = database

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        command = event.command
        if event.command_name not in WRITES | READS or command.get("comment") == RECORDER_COMMENT:
            return
        if event.database_name != self._database:
            return
        with self._lock:
            self._started[event.connection_id, event.request_id] = (event.command_name, dict(command))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        with self._lock:
            found = self._started.pop((event.connection_id, event.request_id), None)
        if found is None:
            return
        name, command = found
        collection = str(command.get("collection") if name == "getMore" else command.get(name))
        reply = dict(event.reply)
        record: dict[str, Any] = {"ts": time.time(), "role": self._role, "cmd": name, "coll": collection}
        if name in WRITES:
            record.update(self._write(name, collection, command, reply))
        else:
            cursor = reply.get("cursor", {})
            docs = cursor.get("firstBatch") or cursor.get("nextBatch") or []
            named = {str(i) for ids in filter_ids(command.get("filter")).values() for i in ids}
            record["ids"] = sorted(doc_job_ids(docs) | named)
        line = json_util.dumps(record)
        with self._lock:
            self._out.write(line + "\n")

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        with self._lock:
            self._started.pop((event.connection_id, event.request_id), None)

    def _write(self, name: str, collection: str, command: dict[str, Any], reply: dict[str, Any]) -> dict[str, Any]:
        """n (documents written), the ids touched and the documents as they are now (none for a delete)."""
        if name == "insert":
            docs = list(command.get("documents", []))
            return {"n": int(reply.get("n", 0)), "ids": sorted(doc_job_ids(docs)), "images": docs}
        if name == "delete":
            named = [filter_ids(d.get("q")) for d in command.get("deletes", [])]
            ids = {str(i) for by_field in named for ids in by_field.values() for i in ids}
            return {"n": int(reply.get("n", 0)), "ids": sorted(ids), "images": []}
        queries, written = written_by(name, command, reply)
        images = self._read_back(collection, queries) if written else []
        return {"n": written, "ids": sorted(doc_job_ids(images)), "images": images}

    def _read_back(self, collection: str, queries: list[dict[str, Any] | None]) -> list[dict[str, Any]]:
        """The documents the queries named by id, as they are now."""
        images: dict[Any, dict[str, Any]] = {}
        for query in queries:
            named = filter_ids(query)
            if not named:
                continue
            lookup = {field: {"$in": ids} for field, ids in named.items()}
            for doc in self._reader[self._database][collection].find(lookup, comment=RECORDER_COMMENT):
                images[doc["_id"]] = doc
        return list(images.values())


def role_of(module: str, args: list[str]) -> str:
    role = module.rsplit(".", 1)[-1]
    return f"{role}:{args[args.index('--type') + 1]}" if "--type" in args else role


def main() -> None:
    out, module, *args = sys.argv[1:]
    uri = os.environ.get("MONGO_URI", "mongodb://127.0.0.1:27017/")
    database = os.environ.get("MONGO_DB", "jobsched")
    monitoring.register(Recorder(out, role_of(module, args), uri, database))
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
