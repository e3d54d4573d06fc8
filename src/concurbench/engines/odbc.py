"""SQL Server through ODBC (pyodbc): driver choice, connection strings, batches, error classes.

Nothing here needs pyodbc to be imported: it is loaded inside the functions that talk to a driver,
so the module (and its tests) work on machines without an ODBC stack.

Sources (Microsoft Learn unless noted):
- "Major version differences" of the ODBC Driver for SQL Server: Driver 18 encrypts by default
  (Encrypt=yes) and then validates the server certificate; Driver 17 defaults to Encrypt=no.
- "DSN and connection string keywords and attributes": Encrypt, TrustServerCertificate, APP,
  Database, ConnectTimeout (v18.7+ only, the SQL_ATTR_LOGIN_TIMEOUT attribute otherwise).
- FreeTDS user guide, "ODBC connection attributes": Server and Port as separate keywords,
  TDS_Version (7.4 for SQL Server 2012 and later).
- Database engine error pages: 1205 deadlock victim, 1222 lock request time out period exceeded,
  3960 snapshot isolation update conflict, 3961 snapshot isolation failed because of concurrent DDL,
  3966 rolled back because the version store was shrunk, 41302 (In-Memory OLTP write/write conflict);
  4060 (the database a login asked for cannot be opened: it is still being recovered after a start) and
  922 (the database is being recovered), both of a server that is starting, so connection errors.
- sp_getapplock: it reports failure by its return code (-1 timed out, -2 cancelled, -3 chosen as
  deadlock victim, -999 a bad call), not by an error.
- SERVERPROPERTY: ProductVersion, ProductLevel, ProductUpdateLevel, Edition, EngineEdition.
"""

from __future__ import annotations

import re
from enum import Enum

from ..errors import EngineError
from .classes import CONNECTION, DEADLOCK, LOCK_NOT_AVAILABLE, OTHER, RETRYABLE, SERIALIZATION

__all__ = ["CONNECTION", "DEADLOCK", "LOCK_NOT_AVAILABLE", "OTHER", "RETRYABLE", "SERIALIZATION",
           "DRIVER_18", "DRIVER_17", "FREETDS", "detect_driver", "usable_drivers", "installed_drivers",
           "connection_string", "safe_connection_string", "split_batches", "classify_error_number", "classify_error", "classify",
           "error_number_from_pyodbc", "error_key", "error_text", "nocount", "server_info_query", "connect"]

DRIVER_18 = "ODBC Driver 18 for SQL Server"
DRIVER_17 = "ODBC Driver 17 for SQL Server"
FREETDS = "FreeTDS"
PREFERRED_DRIVERS = (DRIVER_18, DRIVER_17, FREETDS)
FREETDS_TDS_VERSION = "7.4"  # FreeTDS: 7.4 for SQL Server 2012 and later

DRIVER_HELP = ("install Microsoft's ODBC Driver 18 for SQL Server (package msodbcsql18 from packages.microsoft.com, "
               "with ACCEPT_EULA=Y) or the FreeTDS driver (Debian/Ubuntu: apt-get install unixodbc tdsodbc), "
               "then pip install pyodbc")


# -- drivers -----------------------------------------------------------------------------------------
def installed_drivers() -> list[str]:
    """The ODBC driver names pyodbc sees; [] when pyodbc (or the driver manager) is missing."""
    try:
        import pyodbc  # type: ignore[import-not-found]
    except ImportError:
        return []
    try:
        return list(pyodbc.drivers())
    except Exception:  # noqa: BLE001 - a broken unixODBC setup lists nothing
        return []


def usable_drivers(installed: list[str]) -> list[str]:
    """The drivers among `installed` that concurbench connects with (PREFERRED_DRIVERS, by their exact names), best
    first: what `detect_driver` picks from and `concurbench doctor` lists."""
    return [name for wanted in PREFERRED_DRIVERS for name in installed if name.strip().lower() == wanted.lower()]


def detect_driver(installed: list[str]) -> str:
    """The best driver among `installed`: Driver 18, then 17, then FreeTDS."""
    usable = usable_drivers(installed)
    if usable:
        return usable[0]
    listed = ", ".join(installed) if installed else "none"
    raise EngineError(f"no ODBC driver for SQL Server found (installed ODBC drivers: {listed}); {DRIVER_HELP}")


class Family(Enum):
    """Which driver a name is, for what its connection string takes."""

    FREETDS = "FreeTDS"  # Server and Port apart, a TDS_Version
    MS_18 = "ODBC Driver 18"  # encrypts by default; takes ConnectTimeout
    MS_17 = "ODBC Driver 17"


def _family(driver: str) -> Family:
    low = driver.lower()
    if "tds" in low:
        return Family.FREETDS
    if "18" in low:
        return Family.MS_18
    return Family.MS_17


# -- connection strings ------------------------------------------------------------------------------
def odbc_value(value) -> str:
    """A value as ODBC wants it: braced (with `}` doubled) when it holds `;`, braces or edge spaces."""
    text = str(value)
    if any(c in text for c in ";{}") or text != text.strip():
        return "{" + text.replace("}", "}}") + "}"
    return text


def connection_string(driver: str, host: str, port: int, user: str, password: str, database: str | None = None,
                      trust_server_certificate: bool = True, app: str = "concurbench", timeout: int = 10,
                      encrypt: bool | None = None) -> str:
    """An ODBC connection string with the options the driver needs.

    Driver 18 encrypts by default, so `Encrypt=yes` is written and, for local containers with
    self-signed certificates, `TrustServerCertificate=yes`. Driver 17 does not encrypt unless asked
    (`encrypt=True`). FreeTDS takes `Server` and `Port` separately and a `TDS_Version`.
    `encrypt=None` keeps each driver's default. The login timeout is written as `ConnectTimeout`
    only for Driver 18 (a keyword from v18.7; older drivers ignore it); `connect()` also passes it
    to pyodbc, which sets SQL_ATTR_LOGIN_TIMEOUT on every driver.
    """
    family = _family(driver)
    parts: list[tuple[str, object]] = [("Driver", "{" + driver.replace("}", "}}") + "}")]
    if family is Family.FREETDS:
        parts += [("Server", host), ("Port", int(port)), ("TDS_Version", FREETDS_TDS_VERSION)]
    else:
        parts.append(("Server", f"{host},{int(port)}"))
    if database:
        parts.append(("Database", database))
    parts += [("UID", user), ("PWD", password), ("APP", app)]
    if family is not Family.FREETDS:
        if encrypt is None and family is Family.MS_18:
            encrypt = True  # Driver 18's own default, written out so the string reads the same everywhere
        if encrypt is not None:
            parts.append(("Encrypt", "yes" if encrypt else "no"))
        if encrypt and trust_server_certificate:
            parts.append(("TrustServerCertificate", "yes"))
        if family is Family.MS_18 and timeout:
            parts.append(("ConnectTimeout", int(timeout)))
    out = []
    for key, value in parts:
        out.append(f"{key}={value}" if key == "Driver" else f"{key}={odbc_value(value)}")
    return ";".join(out) + ";"


def _split_conn(s: str) -> list[tuple[str, str]]:
    """key=value pairs of an ODBC string, braces respected."""
    pairs, i, n = [], 0, len(s)
    while i < n:
        eq = s.find("=", i)
        if eq < 0:
            break
        key = s[i:eq].strip()
        j = eq + 1
        if j < n and s[j] == "{":
            k = j + 1
            while k < n:
                if s[k] == "}":
                    if k + 1 < n and s[k + 1] == "}":
                        k += 2
                        continue
                    break
                k += 1
            value = s[j:k + 1]
            semi = s.find(";", k + 1)
        else:
            semi = s.find(";", j)
            value = s[j:] if semi < 0 else s[j:semi]
        pairs.append((key, value))
        i = n if semi < 0 else semi + 1
    return pairs


def safe_connection_string(s: str) -> str:
    """The connection string without its password (for logs and manifests)."""
    kept = [f"{k}={v}" for k, v in _split_conn(s) if k.strip().upper() not in ("PWD", "PASSWORD")]
    return ";".join(kept) + (";" if kept else "")


# What a driver says when it does not trust the server's certificate (Driver 18 through OpenSSL or Schannel,
# Driver 17 with Encrypt=yes, FreeTDS through GnuTLS or OpenSSL): the driver's own words, the only telling sign.
_CERTIFICATE = re.compile(r"certificate verify failed|self[- ]signed certificate|certificate chain was issued by an "
                          r"authority that is not trusted|unable to get local issuer certificate|"
                          r"certificate is not trusted|0x800B0109|0x80090325", re.I)
CERTIFICATE_FIX = ("the server's certificate is not one this machine trusts (a self-signed one, as containers and most "
                   "lab servers have): add ?trust_server_certificate=yes to an mssql:// DSN, or "
                   "TrustServerCertificate=yes to an ODBC connection string (the traffic stays encrypted; the "
                   "certificate is not checked, so do it only on a network you trust)")


def connect(conn_str: str, *, autocommit: bool = True, timeout: int = 10):
    """Open a pyodbc connection (pyodbc imported here, so the module loads without it). A refused certificate says
    the connection option that accepts it (CERTIFICATE_FIX)."""
    try:
        import pyodbc  # type: ignore[import-not-found]
    except ImportError as exc:
        raise EngineError(f"pyodbc is not installed; {DRIVER_HELP}", exc) from exc
    try:
        return pyodbc.connect(conn_str, autocommit=autocommit, timeout=timeout)
    except pyodbc.Error as exc:
        text = _message(exc)
        hint = f"; {CERTIFICATE_FIX}" if _CERTIFICATE.search(text) else ""
        raise EngineError(f"cannot connect to SQL Server ({safe_connection_string(conn_str)}): "
                          f"{text.splitlines()[0] if text else type(exc).__name__}{hint}", exc) from exc


# -- batches -----------------------------------------------------------------------------------------
_GO = re.compile(r"^[ \t]*GO(?:[ \t]+(\d+))?[ \t]*(?:--.*)?$", re.IGNORECASE)


def split_batches(text: str) -> list[tuple[int, str]]:
    """T-SQL batches split on `GO` lines, as sqlcmd does, with the line each batch starts on (1-based).

    A separator is a line holding only `GO` (any case), optionally a repeat count (`GO 3` sends the
    batch three times) and a `--` comment. GO inside strings ('...', N'...'), quoted identifiers
    ("..." and [...]) or block comments (nested) is text, and so are words such as GOTO.
    Batches that hold only whitespace or comments are dropped.
    """
    out: list[tuple[int, str]] = []
    quote = ""  # the closing character of an open string or identifier
    depth = 0  # nesting of /* */ comments
    batch: list[str] = []
    start = 0  # line of the batch's first code character
    for lineno, line in enumerate(text.splitlines(), 1):
        if not quote and not depth:
            m = _GO.match(line)
            if m:
                count = int(m.group(1)) if m.group(1) else 1
                if count < 1:
                    raise ValueError(f"line {lineno}: GO count must be at least 1")
                if start:
                    body = "\n".join(batch).strip()
                    out.extend([(start, body)] * count)
                batch, start = [], 0
                continue
        i, n = 0, len(line)
        while i < n:
            ch = line[i]
            if quote:
                if ch == quote:
                    if i + 1 < n and line[i + 1] == quote:
                        i += 2
                        continue
                    quote = ""
                i += 1
            elif depth:
                if line.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif line.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
            elif line.startswith("--", i):
                break
            elif line.startswith("/*", i):
                depth, i = 1, i + 2
            else:
                if not ch.isspace() and not start:
                    start = lineno
                if ch in "'\"":
                    quote = ch
                elif ch == "[":
                    quote = "]"
                i += 1
        batch.append(line)
    if start:
        out.append((start, "\n".join(batch).strip()))
    return out


def nocount(batch: str) -> str:
    """The batch with `SET NOCOUNT ON;` in front, so no row-count messages come back."""
    if re.match(r"\s*SET\s+NOCOUNT\s+ON\b", batch, re.IGNORECASE):
        return batch
    return "SET NOCOUNT ON;\n" + batch


# -- errors ------------------------------------------------------------------------------------------
_NUMBER_CLASSES = {
    1205: DEADLOCK,  # chosen as deadlock victim
    3960: SERIALIZATION,  # snapshot isolation aborted due to an update conflict
    3961: SERIALIZATION,  # snapshot isolation failed: the object was changed by concurrent DDL
    3966: SERIALIZATION,  # rolled back when accessing the version store (marked victim when it shrank)
    41302: SERIALIZATION,  # In-Memory OLTP write/write conflict
    41305: SERIALIZATION,  # In-Memory OLTP repeatable read validation failure
    41325: SERIALIZATION,  # In-Memory OLTP serializable validation failure
    41301: SERIALIZATION,  # In-Memory OLTP commit dependency failure
    1222: LOCK_NOT_AVAILABLE,  # lock request time out period exceeded (SET LOCK_TIMEOUT)
}
# Network-level failures the drivers report as native errors (Windows socket codes and SNI errors), and
# the server's own answer while it is still starting: worth connecting again.
CONNECTION_NUMBERS = frozenset({
    53,  # network path not found / could not open a connection
    233,  # no process is on the other end of the pipe (connection closed during or after login)
    10053,  # connection aborted by the software on the host
    10054,  # connection reset by the peer
    10060,  # connection attempt timed out
    10061,  # connection refused
    11001,  # host not found
    4060,  # the login's database cannot be opened (still being recovered right after a start)
    922,  # the database is being recovered
})
# A procedure that turns a failed sp_getapplock into an error (sql/mssql/row-lock-setup.sql raises
# `sp_getapplock on <resource> returned <code>` as user error 50000) is classed by that return code.
USER_ERROR = 50000
_APPLOCK = re.compile(r"\bsp_getapplock\b.*?\breturned (-\d+)", re.IGNORECASE | re.DOTALL)
APPLOCK_CLASSES = {-3: DEADLOCK, -1: LOCK_NOT_AVAILABLE}


def classify_error_number(number: int | None) -> str:
    """Map a native SQL Server error number to the harness's error class (the same as PostgreSQL's)."""
    if number is None:
        return OTHER
    if number in _NUMBER_CLASSES:
        return _NUMBER_CLASSES[number]
    if number in CONNECTION_NUMBERS:
        return CONNECTION
    return OTHER


def classify_error(number: int | None, sqlstate: str | None, message: str = "") -> str:
    """Number first (a failed sp_getapplock raised as user error 50000 by its return code); then the ODBC
    SQLSTATE: 08xxx (and a login timeout) are connection failures."""
    by_number = classify_error_number(number)
    if by_number != OTHER:
        return by_number
    if number == USER_ERROR:
        m = _APPLOCK.search(message or "")
        if m and int(m.group(1)) in APPLOCK_CLASSES:
            return APPLOCK_CLASSES[int(m.group(1))]
    state = (sqlstate or "").upper()
    if state.startswith("08") or state == "HYT01":
        return CONNECTION
    if state == "HYT00" and "login" in message.lower():
        return CONNECTION
    if state == "40001":  # SQL Server's drivers report 1205 with SQLSTATE 40001
        return DEADLOCK
    return OTHER


def error_text(exc: BaseException) -> str:
    """The first line of a driver error, without the `[Microsoft][ODBC Driver 18 ...]` prefixes."""
    text = _message(exc).strip()
    return _PREFIX.sub("", text.splitlines()[0]) if text else type(exc).__name__


def _sqlstate(exc: BaseException) -> str | None:
    args = getattr(exc, "args", ())
    if args and isinstance(args[0], str) and re.fullmatch(r"[0-9A-Z]{5}", args[0]):
        return args[0]
    m = re.match(r"\s*\[([0-9A-Z]{5})\]", _message(exc))
    return m.group(1) if m else None


def _message(exc: BaseException) -> str:
    args = getattr(exc, "args", ())
    if len(args) >= 2 and isinstance(args[1], str):
        return args[1]
    if args and isinstance(args[0], str):
        return args[0]
    return str(exc)


_NATIVE = re.compile(r"\((-?\d+)\)\s*\(SQL[A-Za-z]+\)")
_ANY_PAREN_NUMBER = re.compile(r"\((\d+)\)")


def error_number_from_pyodbc(exc: BaseException) -> int | None:
    """The native error number of a pyodbc error: the `(1205)` before `(SQLExecDirectW)`.

    pyodbc puts (sqlstate, message) in args; several diagnostics are joined with '; ' and the first
    one is used. A number 0 (as in `Login timeout expired (0)`) means none.
    """
    text = _message(exc)
    m = _NATIVE.search(text)
    if m:
        number = int(m.group(1))
        return number or None
    first = text.split("; [")[0]
    found = _ANY_PAREN_NUMBER.findall(first)
    if found:
        return int(found[-1]) or None
    return None


def classify(exc: BaseException) -> str:
    """The error class of an exception raised by pyodbc (anything else is OTHER)."""
    if not isinstance(getattr(exc, "args", None), tuple):
        return OTHER
    number = error_number_from_pyodbc(exc)
    state = _sqlstate(exc)
    if number is None and state is None:
        return OTHER
    return classify_error(number, state, _message(exc))


_PREFIX = re.compile(r"^\s*(?:\[[^\]]*\]\s*)+")
_TRAILER = re.compile(r"\s*(?:\(-?\d+\)\s*)?(?:\(SQL[A-Za-z]+\)\s*)?$")
_NUMBERS = re.compile(r"\b\d+\b")


def error_key(exc: BaseException) -> str:
    """A grouping key: the native number (or SQLSTATE) and the message's first diagnostic, numbers masked.

    The driver prefix ([Microsoft][ODBC Driver 18 for SQL Server][SQL Server]) and the trailing
    `(1205) (SQLExecDirectW)` are dropped, so the same server error groups alike under every driver.
    """
    text = _message(exc).strip()
    first = (text.splitlines() or [""])[0].split("; [")[0]
    first = _TRAILER.sub("", _PREFIX.sub("", first))
    number = error_number_from_pyodbc(exc)
    head = str(number) if number is not None else (_sqlstate(exc) or type(exc).__name__)
    return f"{head}: {_NUMBERS.sub('N', first)[:200]}"


# -- server facts ------------------------------------------------------------------------------------
# What else a run on SQL Server depends on, read with the server's version (each query on its own: a
# failure leaves its columns None). Query Store is on by default for new databases from 2022;
# accelerated database recovery (2019+) changes how versions and ghosts are kept; optimized locking
# (2025; DATABASEPROPERTYEX answers NULL for a property it does not know) changes row and TID locks;
# lightweight query profiling (a database scoped configuration, 2019+) costs every query a little.
# Sources: sys.dm_os_sys_info (cpu_count, scheduler_count), sys.database_query_store_options
# (actual_state_desc), sys.databases (is_accelerated_database_recovery_on), DATABASEPROPERTYEX
# (IsOptimizedLockingOn), sys.database_scoped_configurations (LIGHTWEIGHT_QUERY_PROFILING).
SERVER_FACTS = (
    "SELECT cpu_count, scheduler_count FROM sys.dm_os_sys_info",
    "SELECT actual_state_desc AS query_store FROM sys.database_query_store_options",
    "SELECT is_accelerated_database_recovery_on AS adr FROM sys.databases WHERE database_id = DB_ID()",
    "SELECT CAST(DATABASEPROPERTYEX(DB_NAME(), 'IsOptimizedLockingOn') AS int) AS optimized_locking",
    "SELECT CAST(value AS int) AS lightweight_query_profiling FROM sys.database_scoped_configurations "
    "WHERE name = N'LIGHTWEIGHT_QUERY_PROFILING'",
)
FACT_COLUMNS = ("cpu_count", "scheduler_count", "query_store", "adr", "optimized_locking",
                "lightweight_query_profiling")


def server_info_query() -> str:
    """T-SQL returning one row: version text, product version/level/update level, edition, engine edition."""
    return ("SELECT @@VERSION AS version, "
            "CAST(SERVERPROPERTY('ProductVersion') AS nvarchar(128)) AS product_version, "
            "CAST(SERVERPROPERTY('ProductLevel') AS nvarchar(128)) AS product_level, "
            "CAST(SERVERPROPERTY('ProductUpdateLevel') AS nvarchar(128)) AS product_update_level, "
            "CAST(SERVERPROPERTY('Edition') AS nvarchar(128)) AS edition, "
            "CAST(SERVERPROPERTY('EngineEdition') AS int) AS engine_edition")
