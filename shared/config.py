"""Settings from environment variables, validated once at start-up.

Each default is listed with its variable in docs/configuration.md. A bad value stops the process with a message that
names the variable, rather than failing later in some loop.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from urllib.parse import urlsplit

from shared.durations import parse_duration
from shared.nudge import parse_address


class ConfigError(ValueError):
    pass


def without_password(url: str) -> str:
    """`url` with its password, if any, replaced by `***`: what messages and logs may show."""
    password = urlsplit(url).password
    return url if password is None else url.replace(f":{password}@", ":***@", 1)


def comma_list(text: str | None) -> list[str]:
    """The names of a comma-separated list, in order, without blanks or repeats."""
    names: list[str] = []
    for part in (text or "").split(","):
        name = part.strip()
        if name and name not in names:
            names.append(name)
    return names


@dataclass(frozen=True)
class Settings:
    mongo_uri: str = "mongodb://127.0.0.1:27017/?directConnection=true"
    mongo_db: str = "jobsched"
    mongo_timeout: timedelta = timedelta(seconds=5)
    kafka_brokers: str = "127.0.0.1:9092"
    kafka_partitions: int = 6
    kafka_topic_prefix: str = ""
    etcd_endpoints: str = "127.0.0.1:2379"
    election_key: str = "/jobsched/scheduler/leader"
    lease_ttl: timedelta = timedelta(seconds=10)
    api_host: str = "127.0.0.1"
    api_port: int = 8080
    # Every listener is on loopback unless told otherwise: a deployment that wants others to reach it says so.
    metrics_host: str = "127.0.0.1"
    metrics_port: int = 9100
    api_header_timeout: timedelta = timedelta(seconds=10)
    api_body_timeout: timedelta = timedelta(seconds=30)
    api_send_timeout: timedelta = timedelta(seconds=30)
    api_max_in_flight: int = 256
    api_max_in_flight_per_key: int = 32
    api_store_slots: int = 32
    api_store_slots_per_key: int = 8
    api_store_wait: timedelta = timedelta(seconds=1)
    # With AUTH=off, the Host names the API answers (DNS rebinding); empty: loopback names and API_HOST.
    api_allowed_hosts: tuple[str, ...] = ()
    scheduler_tick: timedelta = timedelta(milliseconds=500)
    claim_batch: int = 500
    # Batch claims take runs due within this much ahead; executors hold such a wake-up until its time, so a
    # run starts on time although claims happen only every SCHEDULER_TICK (0: claim only what is due).
    claim_lookahead: timedelta = timedelta(seconds=1)
    # Wake-ups of one type claimed and not yet taken by an executor, at most: a claim beyond them would only
    # lengthen the line that a run claimed later (another tenant's, a higher priority) waits in.
    dispatch_ahead: int = 64
    queued_timeout: timedelta = timedelta(seconds=30)
    claim_timeout: timedelta = timedelta(minutes=5)
    reaper_interval: timedelta = timedelta(seconds=30)
    job_timeout: timedelta = timedelta(minutes=5)
    executor_concurrency: int = 64
    # Executors announce their types in the store this often (and check their running jobs for cancellation);
    # an announcement counts as live for three beats.
    executor_heartbeat: timedelta = timedelta(seconds=1)
    # Job types the API accepts and the scheduler considers although no executor has announced them yet.
    job_types: tuple[str, ...] = ()
    # How long after its last announcement a type stays known (its jobs accepted, waiting for an executor).
    job_type_retention: timedelta = timedelta(days=7)
    # How long finished jobs (and their attempt records) are kept after they finished; None: forever.
    retain_completed: timedelta | None = timedelta(days=7)
    retain_cancelled: timedelta | None = timedelta(days=7)
    retain_dlq: timedelta | None = timedelta(days=30)
    # The contract's demo types (flaky, slow) beside noop and log-message; off where nobody needs them.
    demo_job_types: bool = True
    # Schedules declared with the code (jobsched.Schedule): the tenant of those that name none, and what happens
    # to one the code no longer declares: keep (reported only), pause or cancel.
    declared_schedules_tenant: str = "default"
    declared_schedules_removed: str = "keep"
    log_level: str = "INFO"
    log_format: str = "auto"  # json | text | auto: text on a terminal, JSON otherwise
    # API authentication: "required" or "off"; "" (not set) is off, refused on a non-loopback API_HOST.
    auth: str = ""
    auth_bootstrap_key: str = field(default="", repr=False)  # an admin key taken from a secret
    auth_bootstrap_key_file: str = ""  # ... or the file that holds it (a mounted secret)
    # How often each API replica reloads the keys: a revoked key is refused by every replica within this.
    auth_refresh: timedelta = timedelta(seconds=2)
    rate_limit: int = 200  # requests per second per API key (token bucket; 0: no limit)
    rate_limit_burst: int = 400
    # Nudges (shared/nudge.py): where a scheduler listens for them, and where the API sends them; off when empty.
    nudge_listen: tuple[str, int] | None = None
    nudge_targets: tuple[tuple[str, int], ...] = ()
    # The `http` job type (shared/http_jobs): networks and host names its requests may reach although they are not
    # public addresses (loopback, private, link-local...: refused by default), requests in flight at once per
    # tenant and host in one executor, and how much of a response body is read.
    http_jobs_allow: tuple[str, ...] = ()
    http_jobs_per_host: int = 8
    http_jobs_max_response: int = 1024 * 1024
    # The key the secrets kept in the store are sealed with (shared/sealing.py): base64 of 32 bytes, or the file
    # that holds it (a mounted secret). Neither: the embedded mode makes one beside its file, the distributed
    # processes refuse what needs it (shared/sealing_keys.py).
    secrets_key: str = field(default="", repr=False)
    secrets_key_file: str = ""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        reader = _Reader(env)
        settings = cls(
            mongo_uri=reader.text("MONGO_URI", cls.mongo_uri),
            mongo_db=reader.text("MONGO_DB", cls.mongo_db),
            mongo_timeout=reader.duration("MONGO_TIMEOUT", cls.mongo_timeout),
            kafka_brokers=reader.text("KAFKA_BROKERS", cls.kafka_brokers),
            kafka_partitions=reader.integer("KAFKA_PARTITIONS", cls.kafka_partitions, minimum=1),
            kafka_topic_prefix=reader.text("KAFKA_TOPIC_PREFIX", cls.kafka_topic_prefix),
            etcd_endpoints=reader.text("ETCD_ENDPOINTS", cls.etcd_endpoints),
            election_key=reader.text("ELECTION_KEY", cls.election_key),
            lease_ttl=reader.duration("LEASE_TTL", cls.lease_ttl),
            api_host=reader.text("API_HOST", cls.api_host),
            api_port=reader.integer("API_PORT", cls.api_port, minimum=0),
            metrics_host=reader.text("METRICS_HOST", cls.metrics_host),
            metrics_port=reader.integer("METRICS_PORT", cls.metrics_port, minimum=0),
            api_header_timeout=reader.duration("API_HEADER_TIMEOUT", cls.api_header_timeout),
            api_body_timeout=reader.duration("API_BODY_TIMEOUT", cls.api_body_timeout),
            api_send_timeout=reader.duration("API_SEND_TIMEOUT", cls.api_send_timeout),
            api_max_in_flight=reader.integer("API_MAX_IN_FLIGHT", cls.api_max_in_flight, minimum=1),
            api_max_in_flight_per_key=reader.integer(
                "API_MAX_IN_FLIGHT_PER_KEY", cls.api_max_in_flight_per_key, minimum=1
            ),
            api_store_slots=reader.integer("API_STORE_SLOTS", cls.api_store_slots, minimum=1),
            api_store_slots_per_key=reader.integer("API_STORE_SLOTS_PER_KEY", cls.api_store_slots_per_key, minimum=1),
            api_store_wait=reader.duration("API_STORE_WAIT", cls.api_store_wait),
            api_allowed_hosts=reader.names("API_ALLOWED_HOSTS"),
            http_jobs_allow=reader.names("HTTP_JOBS_ALLOW"),
            http_jobs_per_host=reader.integer("HTTP_JOBS_PER_HOST", cls.http_jobs_per_host, minimum=1),
            http_jobs_max_response=reader.integer("HTTP_JOBS_MAX_RESPONSE", cls.http_jobs_max_response, minimum=1024),
            secrets_key=reader.text("JOBSCHED_SECRETS_KEY", cls.secrets_key),
            secrets_key_file=reader.text("JOBSCHED_SECRETS_KEY_FILE", cls.secrets_key_file),
            scheduler_tick=reader.duration("SCHEDULER_TICK", cls.scheduler_tick),
            claim_batch=reader.integer("CLAIM_BATCH", cls.claim_batch, minimum=1),
            claim_lookahead=reader.duration("CLAIM_LOOKAHEAD", cls.claim_lookahead, allow_zero=True),
            dispatch_ahead=reader.integer("DISPATCH_AHEAD", cls.dispatch_ahead, minimum=1),
            queued_timeout=reader.duration("QUEUED_TIMEOUT", cls.queued_timeout),
            claim_timeout=reader.duration("CLAIM_TIMEOUT", cls.claim_timeout),
            reaper_interval=reader.duration("REAPER_INTERVAL", cls.reaper_interval),
            job_timeout=reader.duration("JOB_TIMEOUT", cls.job_timeout),
            executor_concurrency=reader.integer("EXECUTOR_CONCURRENCY", cls.executor_concurrency, minimum=1),
            executor_heartbeat=reader.duration("EXECUTOR_HEARTBEAT", cls.executor_heartbeat),
            job_types=reader.names("JOB_TYPES"),
            job_type_retention=reader.duration("JOB_TYPE_RETENTION", cls.job_type_retention),
            retain_completed=reader.retention("RETAIN_COMPLETED", cls.retain_completed),
            retain_cancelled=reader.retention("RETAIN_CANCELLED", cls.retain_cancelled),
            retain_dlq=reader.retention("RETAIN_DLQ", cls.retain_dlq),
            demo_job_types=reader.choice("DEMO_JOB_TYPES", "true", ("true", "false")) == "true",
            declared_schedules_tenant=reader.text("DECLARED_SCHEDULES_TENANT", cls.declared_schedules_tenant),
            declared_schedules_removed=reader.choice(
                "DECLARED_SCHEDULES_REMOVED", cls.declared_schedules_removed, ("keep", "pause", "cancel")
            ),
            log_level=reader.choice("LOG_LEVEL", cls.log_level, ("DEBUG", "INFO", "WARNING", "ERROR")),
            log_format=reader.choice("LOG_FORMAT", cls.log_format, ("auto", "json", "text")),
            auth=reader.choice("AUTH", cls.auth, ("required", "off")),
            auth_bootstrap_key=reader.text("AUTH_BOOTSTRAP_KEY", cls.auth_bootstrap_key),
            auth_bootstrap_key_file=reader.text("AUTH_BOOTSTRAP_KEY_FILE", cls.auth_bootstrap_key_file),
            auth_refresh=reader.duration("AUTH_REFRESH", cls.auth_refresh),
            rate_limit=reader.integer("RATE_LIMIT", cls.rate_limit, minimum=0),
            rate_limit_burst=reader.integer("RATE_LIMIT_BURST", cls.rate_limit_burst, minimum=1),
            nudge_listen=next(iter(reader.addresses("NUDGE_LISTEN")), None),
            nudge_targets=reader.addresses("NUDGE_TARGETS"),
        )
        if settings.lease_ttl < timedelta(seconds=2):
            raise ConfigError("LEASE_TTL must be at least 2s")
        return settings


class _Reader:
    def __init__(self, env: Mapping[str, str]) -> None:
        self._env = env

    def text(self, name: str, default: str) -> str:
        value = self._env.get(name, "").strip()
        return value or default

    def names(self, name: str) -> tuple[str, ...]:
        return tuple(comma_list(self._env.get(name)))

    def integer(self, name: str, default: int, *, minimum: int) -> int:
        raw = self._env.get(name, "").strip()
        if not raw:
            return default
        try:
            value = int(raw)
        except ValueError:
            raise ConfigError(f"{name}={raw!r} is not an integer") from None
        if value < minimum:
            raise ConfigError(f"{name}={value} must be >= {minimum}")
        return value

    def addresses(self, name: str) -> tuple[tuple[str, int], ...]:
        raw = self._env.get(name, "").strip()
        try:
            return tuple(parse_address(part) for part in raw.split(",") if part.strip())
        except ValueError as exc:
            raise ConfigError(f"{name}: {exc}") from None

    def duration(self, name: str, default: timedelta, *, allow_zero: bool = False) -> timedelta:
        raw = self._env.get(name, "").strip()
        if not raw:
            return default
        try:
            value = parse_duration(raw)
        except ValueError as exc:
            raise ConfigError(f"{name}: {exc}") from None
        if value < timedelta(0) or (value == timedelta(0) and not allow_zero):
            raise ConfigError(f"{name}={raw!r} must be {'zero or more' if allow_zero else 'positive'}")
        return value

    def retention(self, name: str, default: timedelta | None) -> timedelta | None:
        """A positive duration, or `forever` (None: kept until deleted by hand)."""
        raw = self._env.get(name, "").strip()
        if not raw:
            return default
        return None if raw.lower() == "forever" else self.duration(name, timedelta(0))

    def choice(self, name: str, default: str, allowed: tuple[str, ...]) -> str:
        raw = self._env.get(name, "").strip()
        if not raw:
            return default
        value = raw.upper() if default.isupper() else raw
        if value not in allowed:
            raise ConfigError(f"{name}={raw!r} must be one of {', '.join(allowed)}")
        return value
