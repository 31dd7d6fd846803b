"""The parts of `python -m loadtest.bench soak` (loadtest/scenarios/soak.py): the job type its executors run,
the load it sends, what it reads back from the store, and its windows."""
