"""The Python API: ``dpsql.connect`` and the connection's ``sql``/``explain``/``budget``, and Result."""
