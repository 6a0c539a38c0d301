"""Tests of dpsql/plan/: DP partition selection."""
