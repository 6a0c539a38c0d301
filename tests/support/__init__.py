"""What the tests share, so that no test file imports another: each module here is imported by tests of
more than one file (or by tools/ and benchmarks/, for the fixture).

- ``paths``: where things are in the repository; pyproject.toml read once.
- ``fixture``: the fixture database and its policy (``tests/conftest.py`` makes fixtures of them).
- ``checks``: example counts, hypothesis settings, ``refusal``.
- ``leaks``: the metamorphic leak test's machinery (run on D and D', the three properties, ``Worlds``).
- ``leak_world``: D with a column of every type and its adversarial neighbours (``TypedWorlds``).
- ``queries``: query generators (``queries.grammar`` the grammar fuzzer, ``queries.mutations`` mutated
  accepted queries, ``queries.typed`` queries over the leak world's typed columns).
- ``exact``: a plan's exact stages run on a small table with the noise off (sensitivity, quantiles).
- ``sql_tree``: the rewritten SQL parsed, its CTEs and nodes found (tests check trees, not text).
- ``stats``: goodness of fit against the exact discrete Laplace.
- ``quantile_laws``: the quantile rules' exact laws from their definitions, and neighbouring histograms.
- ``sources``: random sources for the sampler tests (seeded, scripted) and their binomial test.
- ``tpch``: TPC-H's shape in miniature (customer, orders, lineitem, nation) for the join tests, and
  ``whole``: every TPC-H table under benchmarks/tpch/policy.yaml, a few synthetic rows each.
- ``server``: a real dpsql server on the loopback address, in a thread or a process.
- ``cli``: the CLI tests' policy and table of people (also a release's, tests/publish/).
- ``spark``: the fixture's tables as a Spark session's views (tests/engines/, marker ``spark``).
- ``benchmarks``: a benchmark harness of benchmarks/ loaded as a module.
"""
