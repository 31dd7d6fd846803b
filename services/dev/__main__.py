"""`jobsched dev` / `python -m services.dev`: the whole product in one process on ./jobsched.db, for development
(services/embedded/commands.py; `jobsched standalone` is the same as a service)."""

from services.embedded.commands import dev_main as main

if __name__ == "__main__":
    main()
