"""Keywords DuckDB's parser refuses as an unquoted alias where sqlglot reads one (``SELECT COUNT(*) all``,
``SELECT x year``, ``FROM t AS from``): dpsql answers only what DuckDB would parse, so frontend/parse.py
refuses these (DP100). Found by parsing each of ``duckdb_keywords()`` in the three places with both
parsers; tests/frontend/test_parse_keywords.py repeats that against the installed DuckDB, so a grammar
change there fails a test rather than widening or narrowing the dialect silently."""

# ``SELECT x <kw> FROM t``: an item's alias written without AS
BARE_ITEM_ALIAS = frozenset("""
    all analyse analyze anti any array asc asof asymmetric at authorization binary both by case cast
    centuries century check collation column concurrently constraint day days decade decades default
    deferrable desc describe do end escape exclude export_state false filter foreign freeze full group
    hour hours ignore initially is lambda leading left limit microsecond microseconds millennia
    millennium millisecond milliseconds minute minutes month months natural null offset order over pivot
    pivot_longer pivot_wider placing precision primary quarter quarters references rename replace
    respect right second seconds semi show similar some symmetric table to trailing true unique unpack
    unpivot variadic varying verbose week weeks window within without year years
""".split())

# ``FROM t <kw>``: a table's or subquery's alias written without AS
BARE_TABLE_ALIAS = frozenset("""
    all analyse analyze any array asc asymmetric at authorization binary both by case cast check collate
    collation column concurrently constraint default deferrable desc describe do end false foreign
    freeze group in initially is isnull lambda leading null offset order overlaps pivot pivot_longer
    pivot_wider placing primary references show similar some symmetric table to trailing true unique
    unpack unpivot variadic verbose
""".split())

# ``FROM t AS <kw>``: a table's or subquery's alias after AS (an item's may be any keyword after AS)
TABLE_ALIAS = frozenset("""
    all analyse analyze and anti any array as asc asof asymmetric at authorization binary both by case
    cast check collate collation column concurrently constraint create cross default deferrable desc
    describe distinct do else end except false fetch for foreign freeze from full glob group having
    ilike in initially inner intersect into is isnull join lambda lateral leading left like limit
    natural notnull null offset on only or order outer overlaps pivot pivot_longer pivot_wider placing
    positional primary qualify references returning right semi show similar some summarize symmetric
    table tablesample then to trailing true union unique unpack unpivot using variadic verbose when
    where window with
""".split())
