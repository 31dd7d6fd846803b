"""The job types a process serves: the built-ins, and the user's collections loaded by name (plugins.py).

`registry` is the process-wide registry of the first releases, which handler modules written against it
register into (`from shared.handlers import registry`); deprecated in favour of `jobsched.JobTypes`.
"""

from shared.handlers.registry import HandlerRegistry, moved_names

registry = HandlerRegistry()

__getattr__ = moved_names(
    __name__,
    {
        "Backoff": "jobsched.Backoff",
        "HandlerContext": "jobsched.HandlerContext",
        "HandlerError": "jobsched.HandlerError",
        "Payload": "jobsched.Payload",
    },
)

__all__ = ["HandlerRegistry", "registry"]
