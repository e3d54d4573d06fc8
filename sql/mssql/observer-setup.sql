-- Members and their payments for the observer-overhead loop (scenarios/mssql/observer-overhead.yaml).
-- Deterministic data, generated here: every member has about ${payments} / ${members} payments,
-- spread by a multiplicative hash and dated over three years; the loop reads one member's latest
-- payment. ${members} and ${payments} are the scenario's parameters (at most 1,000,000 each).

DROP TABLE IF EXISTS dbo.payments;
DROP TABLE IF EXISTS dbo.members;
GO

CREATE TABLE dbo.members (
    member_no int          NOT NULL,
    lastname  nvarchar(30) NOT NULL,
    firstname nvarchar(30) NOT NULL,
    region_no int          NOT NULL,
    CONSTRAINT pk_members PRIMARY KEY CLUSTERED (member_no)
);

CREATE TABLE dbo.payments (
    payment_no  int           NOT NULL,
    member_no   int           NOT NULL,
    payment_dt  datetime2(0)  NOT NULL,
    payment_amt decimal(10,2) NOT NULL,
    CONSTRAINT pk_payments PRIMARY KEY CLUSTERED (payment_no),
    CONSTRAINT fk_payments_members FOREIGN KEY (member_no) REFERENCES dbo.members (member_no)
);
GO

-- 1 .. 1,000,000 from six digits; each insert keeps the count it wants.
CREATE OR ALTER VIEW dbo.numbers AS
WITH digits AS (
    SELECT d.v FROM (VALUES (0), (1), (2), (3), (4), (5), (6), (7), (8), (9)) AS d(v)
)
SELECT 1 + a.v + 10 * b.v + 100 * c.v + 1000 * e.v + 10000 * f.v + 100000 * g.v AS n
FROM digits AS a CROSS JOIN digits AS b CROSS JOIN digits AS c
CROSS JOIN digits AS e CROSS JOIN digits AS f CROSS JOIN digits AS g;
GO

INSERT INTO dbo.members (member_no, lastname, firstname, region_no)
SELECT n.n,
       CONCAT(N'LAST', RIGHT(CONCAT(N'000000', n.n), 6)),
       CONCAT(N'FIRST', n.n % 97),
       1 + n.n % 9
FROM dbo.numbers AS n
WHERE n.n <= ${members};

INSERT INTO dbo.payments (payment_no, member_no, payment_dt, payment_amt)
SELECT n.n,
       1 + CAST((CAST(n.n AS bigint) * 7919) % ${members} AS int),
       DATEADD(SECOND, CAST((CAST(n.n AS bigint) * 7411) % 94608000 AS int), CAST('2021-01-01T00:00:00' AS datetime2(0))),
       CAST((CAST(n.n AS bigint) * 31 % 500000) / 100.0 AS decimal(10,2))
FROM dbo.numbers AS n
WHERE n.n <= ${payments};
GO

-- The loop's access path: one seek per call for a member's newest payment.
CREATE NONCLUSTERED INDEX ix_payments_member_dt ON dbo.payments (member_no, payment_dt DESC) INCLUDE (payment_amt);
GO
