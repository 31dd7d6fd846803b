"""The embedded mode: the whole product in one process on a SQLite file (`Embedded`), its commands
(`jobsched standalone`, `jobsched dev`) and the file's backup and restore (`jobsched backup`, `restore`)."""

from services.embedded.node import Embedded

__all__ = ["Embedded"]
