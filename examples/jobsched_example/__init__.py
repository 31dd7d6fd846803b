"""An application's own job types for jobsched, and a script that enqueues work through the client."""
