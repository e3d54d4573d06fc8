"""The optional compiled event loop (src/concurbench/workload/_fastloop.c).

Everything else is declared in pyproject.toml. The extension needs a C compiler and Python's
headers (on Debian: gcc and python3-dev), and nothing of libpq at build time: it calls the libpq
psycopg is linked with. Without them the build warns and the install goes on; the pure Python
loop then runs (`concurbench doctor` says which loop a run would use).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("concurbench.workload._fastloop", ["src/concurbench/workload/_fastloop.c"],
                             libraries=["dl", "m"], optional=True)])
