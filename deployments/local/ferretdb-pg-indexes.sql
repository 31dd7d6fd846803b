-- PostgreSQL-side indexes for FerretDB 1.x collections (applied by ferretdb.sh at every start; idempotent).
--
-- FerretDB 1.x pushes a filter's equalities down as `_jsonb->'key' @> 'value'`, and the only indexes it
-- creates are btree expression indexes, which cannot answer `@>`: every query scans the whole table, even a
-- lookup by _id (11 ms with 20,000 documents here). A GIN index on the same expression answers it (0.03 ms).
-- So each collection table FerretDB creates gets one GIN index per equality key jobsched's hot queries use:
--   _id         lookups and guarded single-document writes (also the peer baseline's deletes)
--   claimToken  the executor's start guard, the scheduler's re-read of a claim
--   startToken  the read of a start batch's jobs, the guard that completes them
--   dueSlot     the scheduler's due-slot queries (shared/store/mongo_compat/due_slots.py)
--   kind        the scheduler's look for due recurring templates at every tick: `kind = template` is rare, so
--               the index answers it; without it that query scanned every job ever kept, twice a second
-- Every index costs on each write (a rewritten document gets new entries in all of them), so keys that only
-- rare or unselective queries use (status, tenantId, ...) are left out. Measured: docs/stand-in.md.
-- This is a property of the local stand-in: MongoDB proper uses the indexes ensure_schema creates.

SET client_min_messages = warning;  -- "does not exist, skipping" on a new cluster is expected

CREATE OR REPLACE FUNCTION jobsched_index_collection(tbl regclass) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  k text;
BEGIN
  FOREACH k IN ARRAY ARRAY['_id', 'claimToken', 'startToken', 'dueSlot', 'kind'] LOOP
    EXECUTE format(
      'CREATE INDEX IF NOT EXISTS %I ON %s USING gin ((_jsonb->%L) jsonb_path_ops)',
      left(split_part(tbl::text, '.', 2) || '_gin_' || lower(k), 63), tbl, k
    );
  END LOOP;
END $$;

CREATE OR REPLACE FUNCTION jobsched_is_collection(tbl regclass) RETURNS boolean LANGUAGE sql AS $$
  -- a FerretDB collection: a single jsonb column, in a schema FerretDB manages, not its metadata table
  SELECT c.relname NOT LIKE '\_ferretdb\_%'
     AND EXISTS (SELECT 1 FROM pg_attribute a
                 WHERE a.attrelid = c.oid AND a.attname = '_jsonb' AND a.atttypid = 'jsonb'::regtype)
     AND EXISTS (SELECT 1 FROM pg_class m
                 WHERE m.relnamespace = c.relnamespace AND m.relname = '_ferretdb_database_metadata')
  FROM pg_class c WHERE c.oid = tbl
$$;

CREATE OR REPLACE FUNCTION jobsched_index_new_collection() RETURNS event_trigger LANGUAGE plpgsql AS $$
DECLARE
  cmd record;
BEGIN
  FOR cmd IN SELECT objid FROM pg_event_trigger_ddl_commands()
             WHERE command_tag = 'CREATE TABLE' AND object_type = 'table' LOOP
    IF jobsched_is_collection(cmd.objid::regclass) THEN
      PERFORM jobsched_index_collection(cmd.objid::regclass);
    END IF;
  END LOOP;
END $$;

DROP EVENT TRIGGER IF EXISTS jobsched_index_new_collection;
CREATE EVENT TRIGGER jobsched_index_new_collection ON ddl_command_end WHEN TAG IN ('CREATE TABLE')
  EXECUTE FUNCTION jobsched_index_new_collection();

-- collections created before this file was applied (a cluster from an earlier version of this script)
SELECT jobsched_index_collection(c.oid::regclass)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind = 'r' AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'public')
  AND jobsched_is_collection(c.oid::regclass);
