"""Publishing: what a data owner's release does with its released tables, after the release.

``consistency.py`` makes tables that are marginals of one another consistent (least squares,
non-negative, integer), ``least_squares.py`` its solvers. Post-processing of released values: no data
is read and no budget spent. A layer beside the server and the client, above the api.
"""
