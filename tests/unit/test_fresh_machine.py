"""The README's test command on a machine with Python alone: a tier whose parts are missing skips and
says why (a failure instead under CI=true). pyodbc installed without unixODBC fails its import with an
ImportError naming the shared library, which pytest's importorskip lets through as a collection error."""

from __future__ import annotations

import builtins

import pytest

from needs import import_pyodbc

REAL_IMPORT = builtins.__import__


@pytest.fixture()
def no_libodbc(monkeypatch):
    def fake(name, *args, **kwargs):
        if name == "pyodbc":
            raise ImportError("libodbc.so.2: cannot open shared object file: No such file or directory")
        return REAL_IMPORT(name, *args, **kwargs)

    monkeypatch.delitem(__import__("sys").modules, "pyodbc", raising=False)
    monkeypatch.setattr(builtins, "__import__", fake)


def test_pyodbc_without_its_shared_library_skips_with_the_reason(no_libodbc, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="libodbc.so.2.*apt-get install unixodbc"):
        import_pyodbc()


def test_under_ci_the_same_is_a_failure(no_libodbc, monkeypatch):
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true.*libodbc.so.2"):
        import_pyodbc()
