"""The built-in `http` job type: a job that sends one HTTP request (request.py says which), to an address the
outbound policy allows (outbound.py), signed for its receiver (signing.py), whose response decides the attempt's
outcome (job_type.py)."""
