-- A pgbench_accounts-like table for the row-lock versus application-lock scenario
-- (scenarios/mssql/row-lock-vs-applock.yaml), and the procedure that takes the application lock.

DROP PROCEDURE IF EXISTS dbo.lock_account;
DROP TABLE IF EXISTS dbo.accounts;
GO

CREATE TABLE dbo.accounts (
    aid      int      NOT NULL,
    bid      int      NOT NULL,
    abalance int      NOT NULL,
    filler   char(84) NULL,
    CONSTRAINT pk_accounts PRIMARY KEY CLUSTERED (aid)
);
GO

-- ${accounts} rows (at most 1,000,000), built from six digits.
WITH digits AS (
    SELECT d.v FROM (VALUES (0), (1), (2), (3), (4), (5), (6), (7), (8), (9)) AS d(v)
), numbers AS (
    SELECT 1 + a.v + 10 * b.v + 100 * c.v + 1000 * e.v + 10000 * f.v + 100000 * g.v AS n
    FROM digits AS a CROSS JOIN digits AS b CROSS JOIN digits AS c
    CROSS JOIN digits AS e CROSS JOIN digits AS f CROSS JOIN digits AS g
)
INSERT INTO dbo.accounts (aid, bid, abalance, filler)
SELECT n.n, (n.n - 1) / 100000 + 1, 0, ''
FROM numbers AS n
WHERE n.n <= ${accounts};
GO

-- The application-lock counterpart of pg_advisory_xact_lock(aid): an exclusive lock on the name
-- 'accounts:<aid>' owned by the caller's transaction (released at COMMIT or ROLLBACK), waiting as
-- long as the session's LOCK_TIMEOUT allows. sp_getapplock reports failure through its return
-- code (-1 timeout, -2 cancelled, -3 deadlock victim, -999 bad call) rather than an error, so a
-- failure is raised here, or the caller would go on to update without the lock. Keep the message's
-- form: the engine reads `sp_getapplock ... returned <code>` of error 50000 and counts -3 as a
-- deadlock and -1 as a lock timeout, like errors 1205 and 1222 of a row lock.
CREATE OR ALTER PROCEDURE dbo.lock_account
    @aid int
AS
BEGIN
    SET NOCOUNT ON;
    DECLARE @resource nvarchar(255) = CONCAT(N'accounts:', @aid);
    DECLARE @status int;
    EXEC @status = sys.sp_getapplock @Resource = @resource, @LockMode = N'Exclusive', @LockOwner = N'Transaction';
    IF @status < 0
    BEGIN
        RAISERROR (N'sp_getapplock on %s returned %d', 16, 1, @resource, @status);
    END;
END;
GO
