"""The analyst's client (``remote.py``): ``dpsql.remote(url, token)`` speaks to ``dpsql serve`` over
HTTP with the in-process connection's verbs. It opens no data, policy or ledger, and imports nothing
of the server: a layer beside it, above the api whose ``Result`` it returns."""
