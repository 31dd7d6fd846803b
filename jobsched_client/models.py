"""`jobsched_client.models` of the first releases: deprecated, use `jobsched` (`from jobsched import ...`)."""

import warnings

from jobsched.client.models import *  # noqa: F403

warnings.warn("jobsched_client.models is deprecated: import from jobsched instead", DeprecationWarning, stacklevel=2)

JobType = ServedType  # noqa: F405 - the name of the first releases
