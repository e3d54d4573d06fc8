"""The SQL Server dsn target's connection strings (no server: nothing here connects)."""

from __future__ import annotations

import pytest

from concurbench.errors import ConfigError, EngineError
from concurbench.provisioners.dsn_mssql import ExistingSqlServer

DRIVERS = ["PostgreSQL Unicode", "ODBC Driver 18 for SQL Server"]


def test_url_with_password_from_the_environment(monkeypatch):
    monkeypatch.setenv("BENCH_PW", "s3cret;x}")
    target = ExistingSqlServer("mssql://bench@127.0.0.1:14330/lab", password_env="BENCH_PW", drivers=DRIVERS)
    assert "Driver={ODBC Driver 18 for SQL Server}" in target.conninfo
    assert "Server=127.0.0.1,14330;" in target.conninfo and "Database=lab;" in target.conninfo
    assert "PWD={s3cret;x}}}" in target.conninfo
    assert "TrustServerCertificate=yes" in target.conninfo  # loopback: a container's self-signed certificate
    assert "s3cret" not in target.safe and "PWD" not in target.safe


def test_remote_url_validates_the_certificate_unless_told(monkeypatch):
    target = ExistingSqlServer("mssql://bench:pw@db.example:1433/lab", drivers=DRIVERS)
    assert "TrustServerCertificate" not in target.conninfo and "Encrypt=yes" in target.conninfo
    trusting = ExistingSqlServer("mssql://bench:pw@db.example/lab?trust_server_certificate=yes", drivers=DRIVERS)
    assert "TrustServerCertificate=yes" in trusting.conninfo


def test_odbc_string_gets_a_driver_and_the_password():
    target = ExistingSqlServer("Server=127.0.0.1,1433;Database=lab;UID=sa", drivers=["FreeTDS"])
    assert target.conninfo.startswith("Driver={FreeTDS};Server=127.0.0.1,1433;")
    assert target.safe == target.conninfo  # no password in it
    with_pw = ExistingSqlServer("Driver={ODBC Driver 17 for SQL Server};Server=h;UID=sa;PWD=abc", drivers=DRIVERS)
    assert "PWD=abc" in with_pw.conninfo and "abc" not in with_pw.safe


def test_clear_errors():
    with pytest.raises(ConfigError, match="NOPE"):
        ExistingSqlServer("mssql://sa@h/db", password_env="NOPE", drivers=DRIVERS)
    with pytest.raises(ConfigError, match="postgresql: URL"):
        ExistingSqlServer("postgresql://sa@h/db", drivers=DRIVERS)
    with pytest.raises(EngineError, match="installed ODBC drivers: PostgreSQL Unicode"):
        ExistingSqlServer("mssql://sa@h/db", drivers=["PostgreSQL Unicode"])
