"""dpsql's tests, grouped the way the code is (docs/architecture.md, "Tests"): a package per layer of
dpsql/ (tests/frontend/ holds the tests of dpsql/frontend/, ...), tests/properties/ for the privacy
properties that cut across the pipeline, tests/contracts/ for the repository's contracts (golden
files, corpora, docs, layers), and tests/support/ for what more than one test file uses.

A package, so that test files are imported by their dotted path (``tests.frontend.test_joins``): two
files of one basename in two packages do not collide, and ``tests.support`` is importable anywhere.
"""
