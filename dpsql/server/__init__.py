"""``dpsql serve``: the HTTP API over an owner's connection, for untrusted analysts with tokens.

``app.py`` the endpoints, ``encode.py`` what they send, ``limits.py`` body size, deadlines and
requests in flight, ``run.py`` uvicorn on the loopback address unless told otherwise; ``static/``
the browser console's files. Imported lazily: the analyst's client (``dpsql/client/``) needs none
of it.
"""
