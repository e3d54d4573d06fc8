-- tempdb allocation contention (scenarios/mssql/tempdb-gam-contention.yaml): two procedures that
-- each put one row into a temp table, called by 100 sessions at once.
--
-- SQL Server caches a temp table created in a stored procedure (keeps its metadata and first pages
-- for the next call) unless something prevents it; a temp table created by dynamic SQL is created
-- and dropped for real on every call: new rows in tempdb's system tables (sysschobjs,
-- sysallocunits, ...) and new pages and extents, whose allocation updates the PFS, GAM and SGAM
-- pages of tempdb's data file. With one data file and 100 callers those few pages are where the
-- callers queue (PAGELATCH_* waits).

DROP PROCEDURE IF EXISTS dbo.temp_churn_dynamic;
DROP PROCEDURE IF EXISTS dbo.temp_churn_static;
GO

-- Creates its temp table inside a batch run by sp_executesql, itself run by sp_executesql: the
-- table belongs to the inner batch, is dropped when that batch ends, and is never cached.
CREATE OR ALTER PROCEDURE dbo.temp_churn_dynamic
AS
BEGIN
    SET NOCOUNT ON;
    DECLARE @inner nvarchar(max) = N'CREATE TABLE #churn_rows (happened_at datetime2(3) NOT NULL, quantity tinyint NOT NULL); INSERT INTO #churn_rows (happened_at, quantity) VALUES (SYSDATETIME(), 1);';
    DECLARE @outer nvarchar(max) = N'EXEC sys.sp_executesql @batch;';
    EXEC sys.sp_executesql @outer, N'@batch nvarchar(max)', @batch = @inner;
END;
GO

-- The same table and row without dynamic SQL: the temp table is created by the procedure itself
-- (no named constraints, no DDL after the CREATE), so SQL Server can cache it between calls.
CREATE OR ALTER PROCEDURE dbo.temp_churn_static
AS
BEGIN
    SET NOCOUNT ON;
    CREATE TABLE #churn_rows (happened_at datetime2(3) NOT NULL, quantity tinyint NOT NULL);
    INSERT INTO #churn_rows (happened_at, quantity) VALUES (SYSDATETIME(), 1);
END;
GO
