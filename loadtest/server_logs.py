"""What the store's servers wrote to their logs during a benchmark: PostgreSQL backend crashes, corruption errors,
FerretDB's errors. deployments/local/ appends them to $JOBSCHED_RUN_DIR/documentdb.log (PostgreSQL with
DocumentDB) and ferretdb.log; each file is read from where it ended when the benchmark began, so only the lines
written since count. A file that is not there (servers run elsewhere) is reported as not read, never as clean.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

POSTGRES_LOG = "documentdb.log"
FERRETDB_LOG = "ferretdb.log"
# "server process (PID n) was terminated by signal 11: Segmentation fault": a backend died, PostgreSQL restarts all.
CRASH = re.compile(r"terminated by signal")
# PostgreSQL's words for a damaged page, index or table ("could not open file "base/5/1302246.1" (target block
# 1245184): previous segment is only 60 blocks": an index or a tuple pointing past the end of its relation).
CORRUPTION = re.compile(
    "|".join(
        (
            r"right sibling",
            r"corrupt",
            r"invalid page",
            r"could not read block",
            r"unexpected zero page",
            r"index .* contains",
            r"target block \d+",
            r"invalid memory alloc request size",
            r"missing chunk number",
            r"could not access status of transaction",
            r"failed to re-find parent key",
            r"unexpected data beyond EOF",
        )
    ),
    re.IGNORECASE,
)
# FerretDB's console lines are "time<TAB>LEVEL<TAB>...": ERROR and the levels above it.
FERRETDB_ERROR = re.compile(r"\t(ERROR|DPANIC|PANIC|FATAL)\t")
CATEGORIES = ("crashes", "corruption", "ferretdb_errors")
SAMPLES = 5  # lines kept per category, to say what was found
SAMPLE_CHARS = 400


class LogTail:
    """The lines appended to one file since this tail was made (or since the file was replaced)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.found = path.exists()
        self._offset = path.stat().st_size if self.found else 0
        self._partial = b""

    def new_lines(self) -> list[str]:
        try:
            size = self.path.stat().st_size
        except OSError:
            return []
        if size < self._offset:  # truncated or replaced: what it holds now was all written since
            self._offset, self._partial = 0, b""
        if size == self._offset:
            return []
        with self.path.open("rb") as log:
            log.seek(self._offset)
            data = log.read(size - self._offset)
        self._offset += len(data)
        *lines, self._partial = (self._partial + data).split(b"\n")  # a line still being written waits
        return [line.decode(errors="replace") for line in lines]


@dataclass
class Finding:
    count: int = 0
    samples: list[str] = field(default_factory=list)

    def add(self, line: str) -> None:
        self.count += 1
        if len(self.samples) < SAMPLES:
            self.samples.append(line[:SAMPLE_CHARS])


class ServerLogs:
    """The PostgreSQL and FerretDB logs in `folder`, from now on."""

    def __init__(self, folder: Path) -> None:
        self.postgres = LogTail(folder / POSTGRES_LOG)
        self.ferretdb = LogTail(folder / FERRETDB_LOG)
        self.findings = {category: Finding() for category in CATEGORIES}

    def read(self) -> Counter[str]:
        """The lines found since the last read, by category (also added to the totals)."""
        found: Counter[str] = Counter()
        for line in self.postgres.new_lines():
            for category, pattern in (("crashes", CRASH), ("corruption", CORRUPTION)):
                if pattern.search(line):
                    self.findings[category].add(line)
                    found[category] += 1
        for line in self.ferretdb.new_lines():
            if FERRETDB_ERROR.search(line):
                self.findings["ferretdb_errors"].add(line)
                found["ferretdb_errors"] += 1
        return found

    def known(self, category: str) -> bool:
        """Whether the log that `category` is read from was there to be read."""
        return (self.ferretdb if category == "ferretdb_errors" else self.postgres).found

    def figures(self) -> dict[str, Any]:
        return {
            "postgres_log": str(self.postgres.path) if self.postgres.found else None,
            "ferretdb_log": str(self.ferretdb.path) if self.ferretdb.found else None,
            **{
                c: {"count": f.count, "samples": f.samples} if self.known(c) else None for c, f in self.findings.items()
            },
        }
