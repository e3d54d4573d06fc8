-- A pgbench_accounts-like table for the row-lock versus advisory-lock scenario.
DROP TABLE IF EXISTS accounts;
CREATE TABLE accounts (
    aid      integer PRIMARY KEY,
    bid      integer NOT NULL,
    abalance integer NOT NULL DEFAULT 0,
    filler   character(84)
);
INSERT INTO accounts (aid, bid, abalance, filler)
SELECT g, (g - 1) / 100000 + 1, 0, ''
FROM generate_series(1, ${accounts}) AS g;
VACUUM ANALYZE accounts;

-- Take a shared row lock on n consecutive accounts, one row at a time (the FOR SHARE loop).
CREATE OR REPLACE FUNCTION lock_share_range(first_aid integer, n integer) RETURNS void
LANGUAGE plpgsql AS $fn$
BEGIN
    FOR i IN 0 .. n - 1 LOOP
        PERFORM 1 FROM accounts WHERE aid = first_aid + i FOR SHARE;
    END LOOP;
END
$fn$;
