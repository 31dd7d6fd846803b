"""`python -m services.embedded`: `jobsched standalone`."""

from services.embedded.commands import standalone_main as main

if __name__ == "__main__":
    main()
