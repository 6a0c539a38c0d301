"""Accounting: exact privacy costs and their composition, and the crash-safe SQLite ledger (storage of
every spend and of released answers for free replay)."""
