-- One row whose primary key moves on every update, and a log of progress every block of updates.
CREATE EXTENSION IF NOT EXISTS pgstattuple;
DROP TABLE IF EXISTS churn, churn_progress;
-- No autovacuum on it: cleanup happens only as scans pass dead entries (or by the VACUUM the
-- scenario runs at the end of an arm), and no automatic ANALYZE changes the plan mid-run.
CREATE TABLE churn (id integer PRIMARY KEY) WITH (autovacuum_enabled = off);
CREATE TABLE churn_progress (n integer PRIMARY KEY, at timestamptz NOT NULL);

-- The server-side loop: each update in its own transaction (a procedure may COMMIT in a loop).
-- The row is found by scanning the key index from its low end, as the article's UPDATE TOP (1)
-- scans from the start of the clustered index: every dead version left behind lies on that path.
CREATE OR REPLACE PROCEDURE churn_loop(n integer, block integer DEFAULT 10000)
LANGUAGE plpgsql AS $body$
BEGIN
    PERFORM set_config('enable_seqscan', 'off', false);  -- always through the index, as the article
    INSERT INTO churn_progress VALUES (0, clock_timestamp());
    COMMIT;
    FOR i IN 1 .. n LOOP
        UPDATE churn SET id = id + 1 WHERE id = (SELECT id FROM churn ORDER BY id LIMIT 1);
        IF i % block = 0 THEN
            INSERT INTO churn_progress VALUES (i, clock_timestamp());
        END IF;
        COMMIT;
    END LOOP;
END
$body$;

-- Seconds taken by each block of updates, and how the last block compares with the first.
CREATE OR REPLACE VIEW churn_growth AS
WITH blocks AS (
    SELECT n, extract(epoch FROM at - lag(at) OVER (ORDER BY n)) AS seconds FROM churn_progress
)
SELECT count(seconds) AS blocks,
       round(min(seconds) FILTER (WHERE n = (SELECT min(n) FROM blocks WHERE seconds IS NOT NULL))::numeric, 3) AS first_block_s,
       round(max(seconds) FILTER (WHERE n = (SELECT max(n) FROM blocks))::numeric, 3) AS last_block_s,
       round((max(seconds) FILTER (WHERE n = (SELECT max(n) FROM blocks))
              / nullif(min(seconds) FILTER (WHERE n = (SELECT min(n) FROM blocks WHERE seconds IS NOT NULL)), 0))::numeric, 2)
           AS last_over_first
FROM blocks;
