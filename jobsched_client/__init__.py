"""The client's import path of the first releases: deprecated, use `jobsched` (`from jobsched import Client`)."""

import warnings

from jobsched.client import *  # noqa: F403
from jobsched.client import ServedType as JobType
from jobsched.client import __all__ as _all

warnings.warn("jobsched_client is deprecated: import from jobsched instead", DeprecationWarning, stacklevel=2)

__all__ = [*_all, "JobType"]
