"""The SQL Server client stack for real, without a SQL Server: pyodbc, unixODBC and the FreeTDS driver.

No SQL Server can run here, but the driver can: these tests connect it to loopback ports where
nothing answers, or where a listener hangs up, and check what concurbench makes of the real
driver's errors (classes, messages without the password, the dsn target's refusal). `.ci/run`
installs unixodbc and tdsodbc; without them the tests skip and say so.
"""

from __future__ import annotations

import socket
import threading

import pytest

from needs import import_pyodbc

pyodbc = import_pyodbc()

from concurbench.engines import odbc, sqlserver  # noqa: E402
from concurbench.engines.classes import CONNECTION  # noqa: E402
from concurbench.errors import EngineError, ProvisionError  # noqa: E402
from concurbench.provisioners.dsn_mssql import ExistingSqlServer  # noqa: E402

pytestmark = pytest.mark.integration
SECRET = "Very-s3cret-pw;{x}"

if odbc.FREETDS not in odbc.installed_drivers():
    pytest.skip(f"the FreeTDS ODBC driver is not installed (drivers: {odbc.installed_drivers() or 'none'}); "
                f"apt-get install unixodbc tdsodbc", allow_module_level=True)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def hang_up_port():
    """A listener that accepts every connection and closes it at once, as a server dying would."""
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join(2)
    server.close()


def test_the_installed_driver_is_found_and_chosen():
    assert odbc.detect_driver(odbc.installed_drivers()) == odbc.FREETDS


@pytest.mark.parametrize("where", ["closed", "hang_up"])
def test_driver_errors_are_connection_errors_and_hide_the_password(where, request):
    port = closed_port() if where == "closed" else request.getfixturevalue("hang_up_port")
    conn_str = odbc.connection_string(odbc.FREETDS, "127.0.0.1", port, "sa", SECRET, "bench", timeout=3)
    with pytest.raises(pyodbc.Error) as raw:
        pyodbc.connect(conn_str, timeout=3)
    assert odbc.classify(raw.value) == CONNECTION
    assert odbc.error_number_from_pyodbc(raw.value) is not None or raw.value.args[0].startswith("08")
    with pytest.raises(EngineError) as caught:
        sqlserver.connect(conn_str, application_name="concurbench:test")
    assert "cannot connect to SQL Server" in caught.value.message
    assert SECRET not in caught.value.message and "PWD" not in caught.value.message
    assert f"Port={port}" in caught.value.message


def test_dsn_target_reports_an_unreachable_server_without_the_password(monkeypatch):
    monkeypatch.setenv("TEST_MSSQL_PW", SECRET)
    target = ExistingSqlServer(f"mssql://sa@127.0.0.1:{closed_port()}/bench", password_env="TEST_MSSQL_PW")
    assert target.conninfo.startswith("Driver={FreeTDS};") and "TDS_Version=7.4" in target.conninfo
    with pytest.raises(ProvisionError) as caught:
        target.start()
    assert SECRET not in caught.value.message and "cannot connect to" in caught.value.message
