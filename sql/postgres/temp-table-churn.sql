-- Functions for the temp-table churn scenario (scenarios/postgres/temp-table-churn.yaml).
--
-- Each function is one "call" of the experiment: it puts one row into a session-private temp table.
-- The first two create that table on every call and let it go at commit, which writes and deletes
-- rows of pg_class, pg_type (the row type and its array type), pg_attribute (two columns plus the
-- system columns) and pg_depend, and creates and unlinks a data file; the third keeps one table per
-- session and only empties it.

-- The table built by dynamic SQL on every call (the scenario's analogue of a procedure whose temp
-- table SQL Server cannot cache). ON COMMIT DROP removes it when the call's transaction commits,
-- as SQL Server drops the temp table when the inner batch ends.
CREATE OR REPLACE FUNCTION churn_dynamic() RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    tab constant text := 'churn_scratch';
BEGIN
    EXECUTE format('CREATE TEMP TABLE %I (happened_at timestamp, quantity smallint) ON COMMIT DROP', tab);
    EXECUTE format('INSERT INTO %I (happened_at, quantity) SELECT localtimestamp, 1', tab);
END
$fn$;

-- The same table and row with static SQL: PL/pgSQL keeps the INSERT's plan and replans it when the
-- table it names is a new relation, but the catalog rows are written and deleted just the same.
CREATE OR REPLACE FUNCTION churn_static() RETURNS void
LANGUAGE plpgsql AS $fn$
BEGIN
    CREATE TEMP TABLE churn_scratch (happened_at timestamp, quantity smallint) ON COMMIT DROP;
    INSERT INTO churn_scratch (happened_at, quantity) SELECT localtimestamp, 1;
END
$fn$;

-- One table per session, created by the session's first call and emptied at every commit.
-- ON COMMIT DELETE ROWS truncates the file in place; an explicit TRUNCATE would give the table a
-- new relfilenode (an update of its pg_class row and a new file) on every call.
CREATE OR REPLACE FUNCTION churn_reuse() RETURNS void
LANGUAGE plpgsql AS $fn$
BEGIN
    IF to_regclass('pg_temp.churn_kept') IS NULL THEN
        CREATE TEMP TABLE churn_kept (happened_at timestamp, quantity smallint) ON COMMIT DELETE ROWS;
    END IF;
    INSERT INTO churn_kept (happened_at, quantity) SELECT localtimestamp, 1;
END
$fn$;

-- The catalogs the churn touches.
CREATE OR REPLACE FUNCTION churn_catalogs() RETURNS regclass[]
LANGUAGE sql IMMUTABLE AS $fn$
    SELECT ARRAY['pg_catalog.pg_class', 'pg_catalog.pg_attribute', 'pg_catalog.pg_type',
                 'pg_catalog.pg_depend']::regclass[]
$fn$;

-- Zero the activity counters of those catalogs, so a variant's probes read its own inserts,
-- deletes and dead tuples (run after the VACUUM FULL that gives every variant compact catalogs).
CREATE OR REPLACE FUNCTION churn_reset_counters() RETURNS void
LANGUAGE sql AS $fn$
    SELECT pg_stat_reset_single_table_counters(c) FROM unnest(churn_catalogs()) AS c;
$fn$;

-- Size and activity counters of the catalogs: a first row 'all' with the sums (the row that
-- metrics and claims read), then one row per catalog. Waits first (up to 15 s) until no session
-- named wait_for is left: a backend flushes its statistics, and drops its temp tables, as it exits.
-- Before PostgreSQL 15 the statistics go through the collector, which writes them to a file that a
-- reader accepts up to 0.5 s old: then it also waits (up to 5 s more) for a file written after the
-- sessions left. From 15 on pg_stat_get_snapshot_timestamp() is NULL here and there is no file.
CREATE OR REPLACE FUNCTION churn_catalog_stats(wait_for text DEFAULT NULL)
RETURNS TABLE (catalog text, bytes bigint, n_tup_ins bigint, n_tup_upd bigint, n_tup_del bigint,
               n_dead_tup bigint, autovacuums bigint)
LANGUAGE plpgsql AS $fn$
DECLARE
    deadline timestamptz := clock_timestamp() + interval '15 s';
    gone timestamptz;
BEGIN
    LOOP
        PERFORM pg_stat_clear_snapshot();
        EXIT WHEN wait_for IS NULL OR clock_timestamp() > deadline OR NOT EXISTS (
            SELECT 1 FROM pg_stat_activity WHERE application_name = wait_for AND pid <> pg_backend_pid());
        PERFORM pg_sleep(0.05);
    END LOOP;
    gone := clock_timestamp();
    deadline := gone + interval '5 s';
    LOOP
        PERFORM pg_stat_clear_snapshot();
        EXIT WHEN coalesce(pg_stat_get_snapshot_timestamp() >= gone, true) OR clock_timestamp() > deadline;
        PERFORM pg_sleep(0.05);
    END LOOP;
    RETURN QUERY
    WITH per AS (
        SELECT s.relname::text AS catalog, pg_total_relation_size(s.relid) AS bytes, s.n_tup_ins,
               s.n_tup_upd, s.n_tup_del, s.n_dead_tup, s.autovacuum_count AS autovacuums
        FROM pg_stat_sys_tables s
        WHERE s.relid = ANY (churn_catalogs())
    )
    SELECT * FROM (
        SELECT 'all' AS catalog, sum(p.bytes)::bigint AS bytes, sum(p.n_tup_ins)::bigint AS n_tup_ins,
               sum(p.n_tup_upd)::bigint AS n_tup_upd, sum(p.n_tup_del)::bigint AS n_tup_del,
               sum(p.n_dead_tup)::bigint AS n_dead_tup, sum(p.autovacuums)::bigint AS autovacuums
        FROM per p
        UNION ALL
        SELECT * FROM per
    ) t
    ORDER BY t.catalog <> 'all', t.catalog;
END
$fn$;
