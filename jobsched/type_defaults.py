"""What a job type's registration sets for its jobs unless a job sets its own: the per-attempt timeout, the
attempt budget and the retry backoff. Executors announce them with their types (shared/job_types/announcements.py),
so that processes that never import the handler apply the same ones (the API stores the type's attempt budget and
backoff on each job it creates, where every closer of an attempt reads them); with them, a digest of
the schedules the executor's code declares with the type, so that a declared schedule changes only once every live
executor of the type declares the same (shared/schedules/declared.py)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from jobsched.backoff import DEFAULT_BACKOFF, Backoff, backoff_document, backoff_from_document
from jobsched.limits import NO_LIMITS, Limits


@dataclass(frozen=True)
class TypeDefaults:
    timeout_s: float | None = None  # None: JOB_TIMEOUT
    max_attempts: int | None = None  # None: 3
    backoff: Backoff = DEFAULT_BACKOFF
    declared: str | None = None  # the digest of the type's declared schedules (None: an executor before them)
    limits: Limits = NO_LIMITS  # registered with the handler (an operator's, set through the API, win)

    def __post_init__(self) -> None:
        if self.timeout_s is not None and not self.timeout_s > 0:
            raise ValueError(f"timeout must be positive (got {self.timeout_s})")
        if self.max_attempts is not None and (isinstance(self.max_attempts, bool) or self.max_attempts < 1):
            raise ValueError(f"max_attempts must be a positive integer (got {self.max_attempts!r})")

    @classmethod
    def of(
        cls,
        *,
        timeout: float | timedelta | None = None,
        max_attempts: int | None = None,
        backoff: Backoff | None = None,
        limits: Limits | None = None,
    ) -> TypeDefaults:
        """From a registration's arguments (a timeout in seconds or as a timedelta)."""
        timeout_s = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
        return cls(
            timeout_s=timeout_s,
            max_attempts=max_attempts,
            backoff=backoff or DEFAULT_BACKOFF,
            limits=limits or NO_LIMITS,
        )

    def to_document(self) -> dict[str, Any]:
        """The stored form (camelCase, as every stored field)."""
        return {
            "timeoutSeconds": self.timeout_s,
            "maxAttempts": self.max_attempts,
            "backoff": backoff_document(self.backoff),
            "declaredSchedules": self.declared,
            "limits": self.limits.to_document() if not self.limits.empty else None,
        }

    @classmethod
    def from_document(cls, doc: dict[str, Any] | None) -> TypeDefaults:
        """The inverse of to_document; whatever cannot be read (an older or hand-edited record) is the default."""
        if not isinstance(doc, dict):
            return cls()
        try:
            backoff = backoff_from_document(doc.get("backoff") or {})
            timeout = doc.get("timeoutSeconds")
            attempts = doc.get("maxAttempts")
            declared = doc.get("declaredSchedules")
            return cls(
                timeout_s=float(timeout) if timeout is not None else None,
                max_attempts=int(attempts) if attempts is not None else None,
                backoff=backoff,
                declared=declared if isinstance(declared, str) else None,
                limits=_limits_or_none(doc.get("limits")),
            )
        except (TypeError, ValueError, AttributeError):
            return cls()


BUILTIN_DEFAULTS = TypeDefaults()


def _limits_or_none(doc: Any) -> Limits:
    """An announcement's limits; ones this version cannot read (a newer field) count as none rather than taking
    the type's other defaults with them."""
    try:
        return Limits.from_document(doc)
    except (TypeError, ValueError):
        return NO_LIMITS
