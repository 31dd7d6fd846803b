"""Where a process takes the key its secrets are sealed with (shared/sealing.py).

- JOBSCHED_SECRETS_KEY (base64 of 32 bytes), or JOBSCHED_SECRETS_KEY_FILE (a file holding it: a mounted secret).
  A key given but unusable (not 32 bytes, a file that cannot be read) stops the process at start, as any bad
  setting does.
- Neither, in the distributed processes (API, executors): they start, and whatever needs the key is refused with
  a message naming the variable (503 from the API, a failed attempt in an executor). Signing secrets keep being
  stored as before the key existed (shared/http_jobs/secrets_sealed.py), so an upgrade does not stop requests
  from being signed.
- Neither, in the embedded mode (`jobsched dev`, `standalone`, `Embedded`): a key generated on the first start
  into `<database>.secrets-key`, beside the SQLite file, readable by its owner only. It protects a copy of the
  database made without it (a backup); whoever can read both files can read the secrets.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
from pathlib import Path
from typing import Final

from shared.config import ConfigError, Settings
from shared.sealing import KEY_FILE_VARIABLE, KEY_VARIABLE, Keyring, key_from_text, new_key_text

log = logging.getLogger("jobsched.secrets")
KEY_FILE_SUFFIX: Final = ".secrets-key"


def configured_keyring(settings: Settings) -> Keyring:
    """The distributed processes' keyring: the configured key, or none (what needs it is refused, and logged)."""
    key = _configured_key(settings)
    return Keyring.missing() if key is None else Keyring(key)


def embedded_keyring(settings: Settings, database: Path) -> Keyring:
    """The embedded mode's keyring: the configured key, else the one kept beside `database` (made if missing)."""
    key = _configured_key(settings)
    if key is not None:
        return Keyring(key)
    path = key_file_beside(database)
    try:
        return Keyring(key_from_text(generated_key_text(path), str(path)))
    except OSError as exc:
        raise ConfigError(f"the secrets key beside the database, {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ConfigError(f"{exc}; it was made for the database beside it: restore it from its backup") from None


def key_file_beside(database: Path) -> Path:
    return database.with_name(database.name + KEY_FILE_SUFFIX)


def generated_key_text(path: Path) -> str:
    """The key in `path`, written first (owner-only) if there is none. Two processes starting at once on the same
    file end with the same key: the new file is complete before it is linked into place, and only one link wins."""
    with contextlib.suppress(FileNotFoundError):
        return path.read_text()
    draft = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")  # each maker's own
    descriptor = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "w") as out:
            out.write(new_key_text() + "\n")
            out.flush()
            os.fsync(out.fileno())
        with contextlib.suppress(FileExistsError):  # another process linked its key first: that one is the key
            os.link(draft, path)
    finally:
        draft.unlink(missing_ok=True)
    log.info("secrets key generated", extra={"action": "secrets_key_generated", "path": str(path)})
    return path.read_text()


def _configured_key(settings: Settings) -> bytes | None:
    if settings.secrets_key and settings.secrets_key_file:
        raise ConfigError(f"set {KEY_VARIABLE} or {KEY_FILE_VARIABLE}, not both")
    text, source = settings.secrets_key, KEY_VARIABLE
    if settings.secrets_key_file:
        source = f"{KEY_FILE_VARIABLE}={settings.secrets_key_file}"
        try:
            text = Path(settings.secrets_key_file).read_text()
        except OSError as exc:
            raise ConfigError(f"{source}: {exc.strerror or exc}") from None
    if not text:
        return None
    try:
        return key_from_text(text, source)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
