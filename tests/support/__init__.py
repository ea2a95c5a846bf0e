"""What the test suites share: the REST test client, bounded waiting, loopback HTTP,
PostgreSQL and Redis servers, audit-chain attacks, and the tool modules that configs name
by entry point (``tests.support.config_tools:…``, ``tests.support.replica_tools:…``).

Import by dotted path (``from tests.support.rest import RestClient``): the repository root
is on ``sys.path`` through ``pythonpath`` in ``[tool.pytest.ini_options]``, and child
processes get it from :func:`tests.support.processes.child_env`.
"""
