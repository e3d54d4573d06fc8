-- RCSI ghost churn (scenarios/mssql/rcsi-ghost-churn.yaml): a one-row table whose clustered key
-- moves on every update, a log of progress every block of updates, and the procedures the
-- scenario calls. Batches are separated by GO lines; every statement ends with a semicolon.
--
-- Changing the key of a clustered index is a delete plus an insert: the old row stays on the page
-- as a ghost until the ghost cleanup task removes it, and under a row-versioning isolation level
-- it also carries a version that must outlive every transaction that might still need it. Each
-- update finds "the first row" by scanning the index from its low end, so every ghost left so far
-- lies on its path.

DROP VIEW IF EXISTS dbo.ghost_growth;
DROP PROCEDURE IF EXISTS dbo.ghost_reset;
DROP PROCEDURE IF EXISTS dbo.ghost_churn_loop;
DROP PROCEDURE IF EXISTS dbo.ghost_wait_for_cleanup;
DROP TABLE IF EXISTS dbo.ghost_demo;
DROP TABLE IF EXISTS dbo.ghost_progress;
GO

-- One row per block of updates done by the server-side loop (n = updates so far, logged_at = when).
CREATE TABLE dbo.ghost_progress (
    n  int          NOT NULL,
    logged_at datetime2(7) NOT NULL,
    CONSTRAINT pk_ghost_progress PRIMARY KEY CLUSTERED (n)
);
GO

-- A fresh arm: a new one-row table (a new object, so nothing is left from the previous arm's
-- ghosts and pages), an empty progress log, and a checkpoint so the arm starts with clean pages.
CREATE OR ALTER PROCEDURE dbo.ghost_reset
AS
BEGIN
    SET NOCOUNT ON;
    DROP TABLE IF EXISTS dbo.ghost_demo;
    CREATE TABLE dbo.ghost_demo (
        id int NOT NULL,
        CONSTRAINT pk_ghost_demo PRIMARY KEY CLUSTERED (id)
    );
    INSERT INTO dbo.ghost_demo (id) VALUES (0);
    TRUNCATE TABLE dbo.ghost_progress;
    CHECKPOINT;
END;
GO

-- The server-side loop: @updates single-row transactions, each moving the key by one.
-- TOP (1) stops the scan at the first live row; TABLOCKX takes one table lock up front, so the
-- per-row update locks the scan still requests are redundant and cheap (they are counted by
-- "Lock Requests/sec" all the same). Commits are not waited for: the scenario forces delayed
-- durability on the database, so this measures ghosts and versions, not the log device.
CREATE OR ALTER PROCEDURE dbo.ghost_churn_loop
    @updates int,
    @block   int = 10000
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;
    DECLARE @done int = 0;
    INSERT INTO dbo.ghost_progress (n, logged_at) VALUES (0, SYSDATETIME());
    WHILE @done < @updates
    BEGIN
        BEGIN TRANSACTION;
        UPDATE TOP (1) dbo.ghost_demo WITH (TABLOCKX)
        SET id = id + 1;
        COMMIT TRANSACTION;
        SET @done = @done + 1;
        IF @done % @block = 0
        BEGIN
            INSERT INTO dbo.ghost_progress (n, logged_at) VALUES (@done, SYSDATETIME());
        END;
    END;
END;
GO

-- Wait (up to @timeout_s seconds) until the background ghost cleanup has emptied the leaf level:
-- no version ghosts and at most one ghost (SQL Server keeps one ghost on the index's first page).
-- Run after an arm, once any held transaction is gone, so the `final` probe sees the cleaned index.
CREATE OR ALTER PROCEDURE dbo.ghost_wait_for_cleanup
    @timeout_s int = 60
AS
BEGIN
    SET NOCOUNT ON;
    DECLARE @deadline datetime2(7) = DATEADD(SECOND, @timeout_s, SYSDATETIME());
    DECLARE @ghosts bigint = 0;
    DECLARE @version_ghosts bigint = 0;
    WHILE SYSDATETIME() < @deadline
    BEGIN
        SELECT @ghosts = SUM(ips.ghost_record_count),
               @version_ghosts = SUM(ips.version_ghost_record_count)
        FROM sys.dm_db_index_physical_stats(DB_ID(), OBJECT_ID(N'dbo.ghost_demo', N'U'), 1, NULL, 'DETAILED') AS ips
        WHERE ips.index_level = 0;
        IF COALESCE(@version_ghosts, 0) = 0 AND COALESCE(@ghosts, 0) <= 1
        BEGIN
            BREAK;
        END;
        WAITFOR DELAY '00:00:00.500';
    END;
END;
GO

-- Seconds taken by each full block of the server-side loop, and how the last block compares with
-- the first: with every ghost kept (an open transaction on 2019), update k skips k - 1 ghosts, so
-- the blocks get slower as the run goes on; when cleanup keeps up they stay about level.
-- Every column is float or int, so the probe's first row becomes metrics.
CREATE OR ALTER VIEW dbo.ghost_growth
AS
WITH blocks AS (
    SELECT p.n,
           CAST(DATEDIFF_BIG(MICROSECOND, LAG(p.logged_at) OVER (ORDER BY p.n), p.logged_at) AS float) / 1000000.0 AS seconds
    FROM dbo.ghost_progress AS p
), ranked AS (
    SELECT b.n, b.seconds,
           ROW_NUMBER() OVER (ORDER BY b.n) AS from_first,
           ROW_NUMBER() OVER (ORDER BY b.n DESC) AS from_last
    FROM blocks AS b
    WHERE b.seconds IS NOT NULL
)
SELECT COUNT(*) AS blocks,
       MAX(CASE WHEN r.from_first = 1 THEN r.seconds END) AS first_block_s,
       MAX(CASE WHEN r.from_last = 1 THEN r.seconds END) AS last_block_s,
       MAX(CASE WHEN r.from_last = 1 THEN r.seconds END)
           / NULLIF(MAX(CASE WHEN r.from_first = 1 THEN r.seconds END), 0) AS last_over_first
FROM ranked AS r;
GO

EXEC dbo.ghost_reset;
GO
