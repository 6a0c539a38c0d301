"""Publishing: a data owner's release of many statistics under one budget, and what it does with its
released tables.

``release.py`` ``publish`` (``dpsql.publish``, ``dpsql publish``) runs a release spec (``spec.py``)
through the batch path, previews it (``preview.py``: costs, expected errors, replays, fit), writes its
tables atomically (``files.py``), its manifest (``manifest.py``, digests keyed by ``keys.py``) and its
reports (``report.py``, ``charts.py``). ``consistency.py`` makes tables that are marginals of one
another consistent (least squares, non-negative, integer), ``least_squares.py`` its solvers:
post-processing of released values, no data read and no budget spent. A layer beside the server and
the client, above the api.

The package face rebinds ``dpsql.publish`` to the function: import these modules as
``from dpsql.publish.spec import load_spec``.
"""
