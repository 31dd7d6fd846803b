"""One module per `python -m loadtest.bench` scenario; each exposes SCENARIO (loadtest.benchkit.Scenario)."""
