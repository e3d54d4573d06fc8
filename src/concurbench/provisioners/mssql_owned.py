"""Whose a database on a SQL Server is, as a dsn run may use it (owned.DatabasePlan), read without changing
anything; and the statements that create, mark and drop a database of concurbench's own.

`plan_database` (dsn_mssql.py) asks the server, over a connection to master (every login may connect
there), whether the database exists, whether the login may create one and open it; then, over a connection
to the database itself, whether it carries concurbench's marker (the database-level extended property `concurbench`)
and which user objects it holds. A database counts as empty when it holds none of:

- objects of sys.objects that are not shipped with SQL Server (is_ms_shipped = 0) and have no parent
  (tables, views, procedures, functions, sequences, synonyms; a table's constraints and triggers come
  with it);
- user-defined types (sys.types.is_user_defined); schemas other than dbo, guest, INFORMATION_SCHEMA,
  sys and those of the fixed database roles (schema_id 5 to 16383); database-level DDL triggers
  (sys.triggers, parent_class 0); user assemblies; XML schema collections outside the sys schema;
  partition functions; full-text catalogs.

Users, roles and permissions do not count: a database an administrator made for concurbench (CREATE
DATABASE, then CREATE USER for the login and db_owner) is empty.

A temporary database of concurbench's in which another session is connected belongs to a run that is
still going (`sessions`); a login without VIEW SERVER STATE sees only its own session, so for it that
check finds nothing, and DROP DATABASE, which fails while any session uses the database (error 3702),
is what keeps the other run's database.

Sources (Microsoft Learn): CREATE DATABASE (needs CREATE DATABASE, CREATE ANY DATABASE or ALTER ANY
DATABASE; the creator owns the new database); DROP DATABASE ("You can't drop a database currently being
used", error 3702); HAS_PERMS_BY_NAME, IS_SRVROLEMEMBER (dbcreator), HAS_DBACCESS, DB_ID; sys.objects
(is_ms_shipped, parent_object_id), sys.types, sys.schemas, sys.triggers (parent_class), sys.assemblies,
sys.xml_schema_collections, sys.partition_functions, sys.fulltext_catalogs; sys.extended_properties
(class 0 is the database), sp_addextendedproperty and sp_updateextendedproperty (at the database level:
no level0 arguments; ALTER or CONTROL on the database, or db_owner); sys.dm_exec_sessions (database_id).
"""

from __future__ import annotations

from ..engines.quoting import tsql_literal, tsql_name
from . import owned
from .owned import DatabasePlan, Ownership

SYSTEM_DATABASES = ("master", "tempdb", "model", "msdb")
SERVER = ("SELECT DB_ID(?) AS database_id, SUSER_SNAME() AS login, "
          "CASE WHEN HAS_PERMS_BY_NAME(NULL, NULL, 'CREATE ANY DATABASE') = 1 OR IS_SRVROLEMEMBER('dbcreator') = 1 "
          "OR IS_SRVROLEMEMBER('sysadmin') = 1 THEN 1 ELSE 0 END AS may_create, HAS_DBACCESS(?) AS may_open")
MARKER = ("SELECT CAST(value AS nvarchar(4000)) AS marker FROM sys.extended_properties "
          "WHERE class = 0 AND name = ?")
MAY_MARK = "SELECT HAS_PERMS_BY_NAME(DB_NAME(), 'DATABASE', 'ALTER') AS may_mark"
USER_OBJECTS = f"""SELECT TOP ({owned.LISTED}) kind, name, COUNT(*) OVER () AS total FROM (
    SELECT LOWER(o.type_desc) AS kind, SCHEMA_NAME(o.schema_id) + N'.' + o.name AS name FROM sys.objects AS o
        WHERE o.is_ms_shipped = 0 AND o.parent_object_id = 0
    UNION ALL SELECT N'type', SCHEMA_NAME(t.schema_id) + N'.' + t.name FROM sys.types AS t WHERE t.is_user_defined = 1
    UNION ALL SELECT N'schema', s.name FROM sys.schemas AS s WHERE s.schema_id BETWEEN 5 AND 16383
    UNION ALL SELECT N'database trigger', tr.name FROM sys.triggers AS tr WHERE tr.parent_class = 0
    UNION ALL SELECT N'assembly', a.name FROM sys.assemblies AS a WHERE a.is_user_defined = 1
    UNION ALL SELECT N'xml schema collection', SCHEMA_NAME(x.schema_id) + N'.' + x.name
        FROM sys.xml_schema_collections AS x WHERE x.schema_id <> 4
    UNION ALL SELECT N'partition function', pf.name FROM sys.partition_functions AS pf
    UNION ALL SELECT N'full-text catalog', c.name FROM sys.fulltext_catalogs AS c
) AS found ORDER BY kind, name"""


def create_sql(database: str) -> str:
    return f"CREATE DATABASE {tsql_name(database)}"


def drop_sql(database: str) -> str:
    return f"DROP DATABASE {tsql_name(database)}"


def mark_sql(text: str, update: bool = False) -> str:
    """The marker, written in the connection's database (an extended property at the database level)."""
    procedure = "sp_updateextendedproperty" if update else "sp_addextendedproperty"
    return f"EXEC sys.{procedure} @name = {tsql_literal(owned.PROPERTY)}, @value = {tsql_literal(text)}"


def server_facts(conn, database: str) -> tuple[bool, str, bool, bool]:
    """(exists, login, may create databases, may open this one), read over a connection to master."""
    row = conn.execute(SERVER, database, database).fetchone()
    return row[0] is not None, str(row[1]), bool(row[2]), bool(row[3])


def plan_of(conn, name: str, *, named: bool, may_create: bool) -> DatabasePlan:
    """The plan of an existing database, read over a connection to it (`conn`)."""
    row = conn.execute(MARKER, owned.PROPERTY).fetchone()
    marker = owned.parse_marker(row[0] if row else None)
    may_mark = bool((conn.execute(MAY_MARK).fetchone() or [0])[0])
    if marker is not None:
        return DatabasePlan(name, Ownership.OWN, named, marker=marker, may_create=may_create, may_mark=may_mark)
    rows = conn.execute(USER_OBJECTS).fetchall()
    if not rows:
        return DatabasePlan(name, Ownership.EMPTY, named, may_create=may_create, may_mark=may_mark)
    return DatabasePlan(name, Ownership.FOREIGN, named, objects=tuple(f"{r[1]} ({r[0]})" for r in rows),
                        object_count=int(rows[0][2]), may_create=may_create, may_mark=may_mark)
