-- Members and their payments, for the observer-overhead loop (scenarios/postgres/observer-overhead.yaml).
-- Deterministic data: every member has payments/members payments on average, spread by a
-- multiplicative hash, dated over a few years; the loop reads one member's latest payment.
DROP TABLE IF EXISTS payments;
DROP TABLE IF EXISTS members;

CREATE TABLE members (
    member_no  integer PRIMARY KEY,
    lastname   text    NOT NULL,
    firstname  text    NOT NULL,
    region_no  integer NOT NULL
);

CREATE TABLE payments (
    payment_no  bigint        PRIMARY KEY,
    member_no   integer       NOT NULL REFERENCES members,
    payment_dt  timestamptz   NOT NULL,
    payment_amt numeric(10,2) NOT NULL
);

INSERT INTO members (member_no, lastname, firstname, region_no)
SELECT g, 'LAST' || lpad(g::text, 6, '0'), 'FIRST' || (g % 97), 1 + g % 9
FROM generate_series(1, ${members}) AS g;

INSERT INTO payments (payment_no, member_no, payment_dt, payment_amt)
SELECT g, 1 + (g::bigint * 7919) % ${members},
       timestamptz '2021-01-01 00:00:00+00' + (g::bigint * 7411 % 94608000) * interval '1 second',
       ((g::bigint * 31) % 500000) / 100.0
FROM generate_series(1, ${payments}) AS g;

CREATE INDEX payments_member_no ON payments (member_no);

VACUUM (ANALYZE) members;
VACUUM (ANALYZE) payments;
