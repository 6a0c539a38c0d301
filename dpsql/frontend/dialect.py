"""The dpsql dialect: DuckDB's, plus GoogleSQL's differential-privacy syntax.

BigQuery DP queries run unchanged::

    SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 1e-6, max_groups_contributed = 2,
                                             privacy_unit_column = id)
           item, AVG(quantity, contribution_bounds_per_group => (0, 100)) AS average_quantity
    FROM professors GROUP BY item

The clause becomes a ``DifferentialPrivacy`` node in the Select's ``meta["dp"]``; named arguments of
the aggregates (``contribution_bounds_per_group => (lo, hi)``) become ``meta["named_args"]``, a list
of (name, expression). Both are checked by the validator (dpsql/frontend/options.py), not here. The
generator prints both back, so ``parse_one(sql, read=Dpsql).sql(dialect=Dpsql)`` round-trips (the
ledger's history and replay keys use it); the rewrite prints plain DuckDB SQL, without them.

>>> import sqlglot
>>> q = sqlglot.parse_one("SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1) SUM(x, contribution_bounds_per_row => (0, 5)) FROM t", read=Dpsql)
>>> [o.sql() for o in q.meta["dp"].options()], [(n, e.sql()) for n, e in q.expressions[0].meta["named_args"]]
(['epsilon = 1'], [('contribution_bounds_per_row', '(0, 5)')])
"""
from __future__ import annotations

from sqlglot import exp
from sqlglot.dialects.duckdb import DuckDB
from sqlglot.generators.duckdb import DuckDBGenerator
from sqlglot.parsers.duckdb import DuckDBParser
from sqlglot.tokens import TokenType

DP_AGGREGATES = ("COUNT", "SUM", "AVG", "VAR_POP", "VAR_SAMP", "VARIANCE", "STDDEV", "STDDEV_POP", "STDDEV_SAMP",
                 "MEDIAN", "QUANTILE_CONT", "PERCENTILE_CONT", "MIN", "MAX")


class DifferentialPrivacy(exp.Expression):
    """``WITH DIFFERENTIAL_PRIVACY OPTIONS(name = value, ...)``: each option an EQ node."""
    arg_types = {"expressions": False}

    def options(self) -> list[exp.Expression]:
        return list(self.expressions)


def _accepting_bounds(builder):
    """Wrap an aggregate's builder so ``name => (lo, hi)`` bounds ride along as args of the node."""

    def build(args, dialect=None):
        named = [a for a in args if isinstance(a, exp.Kwarg)]
        # The parser checks the argument count against the same list after building: drop the
        # named bounds from it in place so COUNT/SUM/AVG keep their arity.
        args[:] = [a for a in args if not isinstance(a, exp.Kwarg)]
        try:
            node = builder(args)
        except TypeError:
            node = builder(args, dialect=dialect)
        # Bounds live in meta: sqlglot refuses unknown args on its aggregate nodes.
        node.meta["named_args"] = [(k.this.name.lower(), k.expression) for k in named]
        return node

    return build


class _Bounded:
    """A node type whose ``from_arg_list`` keeps named bounds (see ``_accepting_bounds``)."""

    def __init__(self, node_type):
        self.from_arg_list = _accepting_bounds(node_type.from_arg_list)


# SmartNoise SQL's names for DuckDB's sample variance and standard deviation.
SMARTNOISE_AGGREGATES = {"VAR": exp.Variance, "STD": exp.Stddev}


class DpsqlParser(DuckDBParser):
    FUNCTIONS = {**DuckDBParser.FUNCTIONS,
                 **{name: _accepting_bounds(DuckDBParser.FUNCTIONS[name]) for name in DP_AGGREGATES},
                 **{name: _accepting_bounds(node.from_arg_list) for name, node in SMARTNOISE_AGGREGATES.items()}}
    # DuckDB parses QUANTILE_CONT with a function parser of its own (for its DISTINCT form), which
    # bypasses FUNCTIONS and dropped named arguments: hand that parser a builder that keeps them.
    FUNCTION_PARSERS = {
        **DuckDBParser.FUNCTION_PARSERS,
        "QUANTILE_CONT": lambda self: self._parse_distinct_arg_function(_Bounded(exp.PercentileCont)),
        # MIN and MAX too (DuckDB's own parser reads MIN(x, n), its top-n form, as ``count``).
        "MIN": lambda self: self._parse_bounded_min_max(exp.Min),
        "MAX": lambda self: self._parse_bounded_min_max(exp.Max),
    }

    def _parse_bounded_min_max(self, func):
        """DuckDBParser._parse_min_max with the named arguments kept (``mechanism => 'tree'``)."""
        expression = self._parse_distinct_arg_function(_Bounded(func))
        if len(expression.expressions) > 1:
            self.raise_error(f"Expected at most 2 arguments for {func.__name__}")
        expression.set("count", expression.expressions[0] if expression.expressions else None)
        expression.set("expressions", None)
        return expression

    def _parse_hint(self):
        # Called right after SELECT: the place of GoogleSQL's `WITH DIFFERENTIAL_PRIVACY` clause.
        if self._match_text_seq("WITH", "DIFFERENTIAL_PRIVACY"):
            options = []
            if self._match_text_seq("OPTIONS"):
                self._match_l_paren()
                options = self._parse_csv(self._parse_disjunction)
                self._match_r_paren()
            self._dp_clause = self.expression(DifferentialPrivacy(expressions=options))
            return None
        return super()._parse_hint()

    def _parse_limit(self, this=None, top=False, skip_limit_token=False):
        # SmartNoise's (and T-SQL's) ``SELECT TOP n``: a LIMIT. TOP is no keyword in DuckDB, so a
        # column named top still parses; only TOP followed by a number is taken.
        if top and self._curr and self._curr.text.upper() == "TOP" and self._next and \
                self._next.token_type == TokenType.NUMBER:
            self._advance()
            return super()._parse_limit(this, top=True, skip_limit_token=True)
        return super()._parse_limit(this, top, skip_limit_token)

    _dp_clause = None

    def _parse_select_query(self, *args, **kwargs):
        # Nested queries (and parenthesised tuples, tried as subqueries) parse in between: keep the
        # clause of the SELECT being parsed on a stack, so it lands on its own SELECT only.
        outer, self._dp_clause = self._dp_clause, None
        try:
            query = super()._parse_select_query(*args, **kwargs)
            if self._dp_clause is not None and isinstance(query, exp.Select):
                query.meta["dp"] = self._dp_clause
        finally:
            self._dp_clause = outer
        return query


def _differential_privacy_sql(generator, clause: DifferentialPrivacy) -> str:
    """The clause as written: ``WITH DIFFERENTIAL_PRIVACY [OPTIONS(name = value, ...)]``."""
    options = clause.options()
    return "WITH DIFFERENTIAL_PRIVACY" + (f" OPTIONS({generator.expressions(sqls=options, flat=True)})"
                                          if options else "")


def _with_named_args(text: str, named: list, generator) -> str:
    """``F(args)`` with ``, name => value`` appended inside its parentheses."""
    if not text.endswith(")"):
        # Never print a query without its bounds: the ledger then keeps the text as typed.
        raise ValueError(f"cannot place named arguments in {text!r}")
    pairs = ", ".join(f"{name} => {generator.sql(value)}" for name, value in named)
    return f"{text[:-1]}{'' if text.endswith('()') else ', '}{pairs})"


class DpsqlGenerator(DuckDBGenerator):
    """DuckDB's generator, printing what the parser put in ``meta``: the DP clause and the bounds.

    Without them the ledger's history and replay keys would drop a query's options and bounds.
    """
    TRANSFORMS = {**DuckDBGenerator.TRANSFORMS, DifferentialPrivacy: _differential_privacy_sql}

    def sql(self, expression, key=None, comment=True):
        # meta_get, not meta: reading meta allocates a dict on every node printed.
        if key == "hint" and isinstance(expression, exp.Select) and expression.meta_get("dp") is not None:
            return f"{super().sql(expression, key)} {self.sql(expression.meta['dp'])}"
        if key is None and isinstance(expression, exp.Expr) and expression.meta_get("named_args"):
            # Comments go after the closing parenthesis, so place the bounds before adding them.
            text = _with_named_args(super().sql(expression, comment=False), expression.meta["named_args"], self)
            return self.maybe_comment(text, expression) if self.comments and comment else text
        return super().sql(expression, key, comment)


class Dpsql(DuckDB):
    """sqlglot dialect: DuckDB plus the GoogleSQL DP clause and contribution bounds."""
    Parser = DpsqlParser
    Generator = DpsqlGenerator
