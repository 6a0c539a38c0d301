"""Tests of dpsql/accounting/: the ledger, analysts and their budgets, policies that evolve."""
