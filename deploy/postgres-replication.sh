#!/bin/sh
# docker-compose.yml mounts this into db's /docker-entrypoint-initdb.d: run once, when the db volume is first
# initialised. It lets db-replica (profile replica) stream the WAL as the rag user, with its password. For a
# volume initialised before this file existed, add the same line to pg_hba.conf by hand and reload
# (docs/operations.md#read-replicas).
set -e
echo "host replication ${POSTGRES_USER} all scram-sha-256" >> "$PGDATA/pg_hba.conf"
