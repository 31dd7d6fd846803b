"""Job storage: the JobStore protocol and its implementations."""
