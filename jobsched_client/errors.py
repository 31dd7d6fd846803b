"""`jobsched_client.errors` of the first releases: deprecated, use `jobsched` (`from jobsched import ...`)."""

import warnings

from jobsched.client.errors import *  # noqa: F403

warnings.warn("jobsched_client.errors is deprecated: import from jobsched instead", DeprecationWarning, stacklevel=2)
