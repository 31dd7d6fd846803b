# syntax=docker/dockerfile:1
# PostgreSQL 15 with DocumentDB, the database under FerretDB 2 (docs/ferretdb.md), built by the script every test
# server is built with (deployments/local/documentdb.sh: libbson 1.28.0 linked statically, RUM, DocumentDB's
# extended RUM, pg_cron and pgvector, from the sha256-checked tarballs in deployments/local/vendor/), so
# production runs the build the soaks and the tests ran. Build from the repository root (ferretdb.yml does):
#   docker build -f deployments/docker/documentdb.Dockerfile -t jobsched-documentdb:local .
# Only the files named in documentdb.Dockerfile.dockerignore (beside this file) are sent as the build context.
ARG POSTGRES_IMAGE=postgres:15-bookworm
FROM ${POSTGRES_IMAGE}

COPY deployments/local/lib.sh deployments/local/documentdb.sh /opt/jobsched-documentdb/
COPY deployments/local/vendor/ /opt/jobsched-documentdb/vendor/
# The official image starts every new cluster from this sample (it sets listen_addresses there itself);
# durability settings stay PostgreSQL's defaults: fsync, synchronous_commit and full_page_writes on. The
# entrypoint runs the CREATE EXTENSION statements once, in POSTGRES_DB, when the data directory is new.
RUN JOBSCHED_CACHE=/tmp/documentdb-build bash /opt/jobsched-documentdb/documentdb.sh install \
    && bash /opt/jobsched-documentdb/documentdb.sh settings >>/usr/share/postgresql/postgresql.conf.sample \
    && bash /opt/jobsched-documentdb/documentdb.sh create-sql >/docker-entrypoint-initdb.d/10-documentdb.sql \
    && rm -rf /tmp/documentdb-build /var/lib/apt/lists/*
