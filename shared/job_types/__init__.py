"""Job types across processes: executors announce the types they serve in the store (announcements.py; each
store's job_types.py keeps them), the API accepts what is known (known.py: built in, configured, or announced)
and the scheduler claims what is served (served.py: announced by a live executor). The handlers themselves are
jobsched.JobTypes collections."""
