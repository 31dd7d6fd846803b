"""A MongoDB database: everything jobsched keeps in one, and the only code that knows its documents.

    database.py         MongoDatabase: the client, the database's name, its collections; connect, ping, close,
                        and translate_errors (a database that is not there is StoreUnavailable)
    migrations.py       the numbered schema changes (every index), frozen once released
    schema.py           the schema's version: ensure_schema applies the pending migrations, refuses a newer database
    codecs.py           documents as the model's objects and back (jobs, records, decided outcomes, updates)
    jobs.py             MongoJobStore: the JobStore protocol
    claims.py           the claim's queries and the start-rate documents' writes
    attempts.py         the executor's starts and finishes of attempts
    browse.py           MongoBrowser: the console's pages and counts
    job_types.py        MongoJobTypes: the types the executors announce, and the operators' limits
    keys.py             MongoKeyStore: the API keys
    signing_secrets.py  MongoSigningSecrets: the tenants' signing secrets of http jobs
    credentials.py      MongoCredentials: the tenants' sealed credentials of http jobs

Every part takes the MongoDatabase it lives in; shared/backends.py opens one and builds the parts over it.
"""

from shared.store.mongo.database import MongoDatabase
from shared.store.mongo.jobs import MongoJobStore

__all__ = ["MongoDatabase", "MongoJobStore"]
