#!/usr/bin/env python3
"""Mutation testing for dpsql's privacy-relevant logic: does the test suite notice a planted bug?

Each mutant replaces one exact snippet of one source file. For every mutant the repository is copied
(tracked and untracked, non-ignored files; never /work/main's own files, never git state) into a
temporary directory, the snippet is replaced there, and the test suite runs in the copy with the copy
first on PYTHONPATH, so the copy's ``dpsql`` is imported rather than the editable install (checked:
``dpsql.__file__`` must lie in the copy). A mutant is

* killed:          the suite failed (with -x it stops at the first failing test, named in the report);
* survived:        the suite passed: no test notices the bug;
* timeout:         the suite ran longer than --timeout seconds (counted as killed, reported apart);
* goldens only:    (with --goldens-apart) the suite without the golden-file and docs tests passed,
                   and those alone failed: the bug shows in the SQL's text only; it needs a test of
                   behaviour (a property, a neighbour, a differential check);
* does not apply:  its ``old`` snippet is not found exactly once in the file. The code is being
                   refactored; such a mutant is reported loudly and makes the exit status non-zero,
                   so it gets re-anchored rather than silently dropped.

The unmutated copy runs first (the baseline); if it fails, the script stops and names the failing
tests (another engineer's work in progress, perhaps): restrict it with --baseline-args, or skip it.

    python3 tools/mutants.py --list
    nice -n 15 python3 tools/mutants.py                                  # every mutant, full suite
    nice -n 15 python3 tools/mutants.py --only distinct_ignores_C --pytest-args "tests/properties/test_regressions.py"
    nice -n 15 python3 tools/mutants.py --jobs 2 --timeout 900 --json results.json
    nice -n 15 python3 tools/mutants.py --goldens-apart --jobs 2     # which kills rest on SQL text alone

Exit status: 0 if every mutant applied and was killed, 1 if any survived or did not apply, 2 if the
baseline failed or the copy does not import its own dpsql.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTEST = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-rfE"]


@dataclasses.dataclass(frozen=True)
class Mutant:
    name: str
    file: str          # relative to the repository root
    old: str           # must occur exactly once in the file
    new: str
    description: str   # the bug it models


M = Mutant
MUTANTS: list[Mutant] = [
    # --- plan/sensitivity.py: the bounds themselves --------------------------------------------
    M("distinct_ignores_C", "dpsql/plan/sensitivity.py",
      "Fraction(min(max_rows, keys))", "Fraction(min(1, keys))",
      "COUNT(DISTINCT col) sensitivity ignores C: a unit adding C new values per partition is under-noised"),
    M("sum_missing_C", "dpsql/plan/sensitivity.py",
      "Sensitivity(max_groups, Fraction(max_rows * bound))", "Sensitivity(max_groups, Fraction(bound))",
      "SUM sensitivity L*B instead of L*C*B: a unit with C rows at the bound is under-noised"),
    M("count_missing_C", "dpsql/plan/sensitivity.py",
      "    return Sensitivity(max_groups, Fraction(max_rows))\n", "    return Sensitivity(max_groups, Fraction(1))\n",
      "COUNT sensitivity L instead of L*C"),
    M("unit_total_missing_L", "dpsql/plan/sensitivity.py",
      "return Sensitivity(max_groups, Fraction(bound))", "return Sensitivity(1, Fraction(bound))",
      "per-group (GoogleSQL) bounded aggregates ignore L"),
    M("quantile_tree_missing_depth", "dpsql/plan/sensitivity.py",
      "nodes = depth * max_groups * max_rows\n    return Sensitivity(nodes, Fraction(max_rows), Fraction(nodes), Fraction(depth * ",
      "nodes = max_groups * max_rows\n    return Sensitivity(nodes, Fraction(max_rows), Fraction(nodes), Fraction(",
      "quantile tree sensitivity forgets a row is counted once per level (D)"),
    M("grid_bound_floor", "dpsql/plan/sensitivity.py",
      "return int(math.ceil(max(abs(lower), abs(upper)) / g))",
      "return int(math.floor(max(abs(lower), abs(upper)) / g))",
      "B rounded down: a value at a non-dyadic bound rounds to B+1 grid steps"),
    # --- plan/, mechanisms/base.py: measurements, the guard, L and C, epsilon split, selection ----
    M("measurement_guard_disabled", "dpsql/mechanisms/laplace.py",
      "release.scale * loss.epsilon >= release.sensitivity.l1",
      "release.scale * loss.epsilon >= 0",
      "the under-noising guard (Measurement.__post_init__ via mechanism.covers) accepts scale*epsilon < sensitivity"),
    M("epsilon_split_without_units", "dpsql/mechanisms/laplace.py",
      "[Loss.pure(share(epsilon, len(sensitivities)))]",
      "[Loss.pure(share(epsilon, max(1, len(sensitivities) - int(selecting))))]",
      "epsilon split over the measurements without partition selection's unit count: shares sum above epsilon"),
    M("share_rounds_to_nearest", "dpsql/mechanisms/losses.py",
      "return value if Fraction(value) <= exact else math.nextafter(value, 0.0)", "return value",
      "epsilon shares rounded to nearest, not down: they can sum above the epsilon charged"),
    M("unit_count_without_L", "dpsql/plan/quantities.py",
      "return 1.0, count_sensitivity(L, 1)", "return 1.0, count_sensitivity(1, 1)",
      "unit counts (partition selection, AVG's per-group denominator) ignore L"),
    M("L_min_over_key_columns", "dpsql/plan/build.py",
      "L = min(L, math.prod(bounds))", "L = min(L, len(bounds) or 1)",
      "L capped by the number of GROUP BY columns instead of the number of partitions"),
    M("rewrite_keeps_L_plus_one", "dpsql/plan/model.py",
      "return L if self.partitions is None else min(L, self.partitions)",
      "return L + 1 if self.partitions is None else min(L + 1, self.partitions)",
      "contribution bounding keeps L+1 partitions per unit while the sensitivity counts L"),
    M("rewrite_caps_C_plus_one", "dpsql/plan/model.py",
      "return 1 if self.table.row_level else self.table.max_rows_per_unit",
      "return 1 if self.table.row_level else self.table.max_rows_per_unit + 1",
      "contribution bounding keeps C+1 rows per unit and partition while the sensitivity counts C"),
    M("selection_ignores_L", "dpsql/plan/build.py",
      "selection_threshold(units.release, L, delta)",
      "selection_threshold(units.release, 1, delta)",
      "partition selection threshold for delta instead of delta/L: a unit reaching L groups leaks L*delta"),
    M("selection_threshold_off_by_one", "dpsql/plan/build.py",
      "delta=delta, threshold=threshold)", "delta=delta, threshold=threshold - 1)",
      "partition selection releases groups one unit below the threshold that bounds delta"),
    # --- mechanisms/discrete_laplace.py ------------------------------------------------------------
    M("dyadic_scale_rounds_down", "dpsql/mechanisms/discrete_laplace.py",
      "numerator = math.ceil(exact * 2**k)", "numerator = math.floor(exact * 2**k)",
      "the dyadic noise scale rounded down: slightly less noise than sensitivity/epsilon"),
    M("noise_sign_dropped", "dpsql/mechanisms/discrete_laplace.py",
      "np.where(b[accept] == 1, -y[accept], y[accept])", "y[accept]",
      "discrete Laplace noise always >= 0 (sign bit ignored)"),
    # --- the discrete Gaussian (issue 22) --------------------------------------------------------------
    M("gaussian_sigma_too_small", "dpsql/mechanisms/discrete_gaussian.py",
      "high - math.exp(epsilon) * (1 - MARGIN) * low", "high - math.exp(2 * epsilon) * (1 - MARGIN) * low",
      "the exact curve's delta understated (e^2eps for e^eps): one count's sigma too small for its (epsilon, delta)"),
    M("gaussian_rho_understated", "dpsql/mechanisms/gaussian.py",
      "return s.l2_squared / (2 * sigma * sigma), Fraction(0)", "return s.l2_squared / (4 * sigma * sigma), Fraction(0)",
      "zCDP's rho halved: several measurements' sigma too small by sqrt(2)"),
    M("gaussian_l2_as_l1", "dpsql/mechanisms/gaussian.py",
      "return s.l2_squared / (2 * sigma * sigma), Fraction(0)", "return s.l1 / (2 * sigma * sigma), Fraction(0)",
      "the Gaussian's L2 bound computed as L1 (sum of moves, not of their squares): under-noised for C > 1"),
    M("gaussian_sampler_accepts_wrongly", "dpsql/mechanisms/discrete_gaussian.py",
      "accept = bernoulli_exp(source, r, den)", "accept = bernoulli_exp(source, r // 2, den)",
      "the sampler's acceptance exp(-gamma) computed for gamma's fraction halved: not the discrete Gaussian"),
    M("gaussian_selection_for_delta", "dpsql/mechanisms/gaussian.py",
      "dg.tail(s, m)[1] <= delta / max_groups", "dg.tail(s, m)[1] <= delta",
      "the Gaussian selection threshold for delta instead of delta/L: a unit reaching L groups leaks L*delta"),
    M("gaussian_selection_delta_twice", "dpsql/mechanisms/gaussian.py",
      "noise_delta = delta / 2 if selecting else delta", "noise_delta = delta",
      "the Gaussian noise and partition selection each take the whole delta: the query spends 2 delta"),
    # --- accounting/: budget, ledger, replay, identity -------------------------------------------------
    M("check_fits_ignores_spent", "dpsql/accounting/basic.py",
      "return state + add_all((c.epsilon, c.delta) for c in charges)",
      "return add_all((c.epsilon, c.delta) for c in charges)",
      "the basic accountant composes each new charge alone, forgetting what is spent"),
    M("fits_within_ignores_delta", "dpsql/accounting/budget.py",
      "return self.epsilon <= total.epsilon and self.delta <= total.delta",
      "return self.epsilon <= total.epsilon",
      "delta is never checked against the budget"),
    M("composition_drops_delta", "dpsql/accounting/budget.py",
      "return Cost(self.epsilon + other.epsilon, self.delta + other.delta)",
      "return Cost(self.epsilon + other.epsilon, max(self.delta, other.delta))",
      "deltas do not add up under composition"),
    M("cost_without_delta", "dpsql/accounting/ledger.py",
      "return Cost.of(plan.epsilon, plan.delta)", "return Cost.of(plan.epsilon, 0)",
      "a query's cost leaves out its delta (partition selection is free in delta)"),
    # The budget check and db.budget compose the same kept history (accounting/history.py ``spent``), so
    # one mutant there stands for both (it was two while the report summed the rows on its own).
    M("failed_not_spent_in_check", "dpsql/accounting/history.py",
      "FROM charges WHERE id > ? ORDER BY id\", [kept.seen])",
      "FROM charges WHERE id > ? AND status <> 'failed' ORDER BY id\", [kept.seen])",
      "a charge whose query failed after running is not counted when checking the next charge"),
    # --- accounting/: the accountants (issue 22) -------------------------------------------------------
    M("zcdp_sum_rounds_down", "dpsql/accounting/conversions.py",
      "_UP = Context(prec=40, rounding=ROUND_CEILING)", "_UP = Context(prec=3, rounding=\"ROUND_FLOOR\")",
      "the zCDP accountant's rho (and delta) kept rounded down, to 3 digits: a history stated cheaper"),
    M("zcdp_conversion_understates_epsilon", "dpsql/accounting/conversions.py",
      "terms = (log_inv_delta / a1, ", "terms = (log_inv_delta / a1 / 2, ",
      "rho-zCDP converted to (epsilon, delta) with half the log(1/delta) term: an epsilon too small"),
    M("zcdp_delta_not_added", "dpsql/accounting/zcdp.py",
      "rho, delta = add_up(rho, r), add_up(delta, d)", "rho, delta = add_up(rho, r), delta",
      "the zCDP accountant forgets approximate deltas (partition selection's, old (epsilon, delta) charges)"),
    M("pld_without_one_charge", "dpsql/accounting/pld.py",
      "collections.Counter(r for c in charges for r in c.made())",
      "collections.Counter(r for c in charges[1:] for r in c.made())",
      "the PLD accountant composes a batch of charges without its first"),
    M("pld_fits_at_twice_delta", "dpsql/accounting/pld.py",
      "return Decimal(self.delta(state, total)) <= total.delta",
      "return Decimal(self.delta(state, total)) <= 2 * total.delta",
      "the PLD accountant lets a history fit at twice the total's delta"),
    M("analyst_check_skipped_under_pld", "dpsql/accounting/ledger.py",
      "mine = None if own is None else self._fits(",
      "mine = None if own is None or accountant.name == 'pld' else self._fits(",
      "under the pld accountant only the total is checked, never the analyst's own budget"),
    M("old_charge_composed_as_nothing", "dpsql/accounting/composition.py",
      "return (Release.approximate(self.epsilon, self.delta),) if self.epsilon or self.delta else ()",
      "return ()",
      "a charge recorded without releases (every charge of an old ledger) costs nothing under zcdp and pld"),
    M("releases_not_stored", "dpsql/api/connection.py",
      "releases=plan.releases())", "releases=None)",
      "the connection charges without the plan's releases (composed as its (epsilon, delta) only)"),
    M("replay_key_without_epsilon", "dpsql/api/replay.py",
      "list(names), str(cost.epsilon), str(cost.delta)]", "list(names), str(cost.delta)]",
      "the replay key leaves out the cost's epsilon"),
    M("ledger_identity_without_budget", "dpsql/accounting/identity.py",
      "budget: dict[str, Any] = {\"epsilon\": float(policy.budget_epsilon), \"delta\": float(policy.budget_delta)}",
      "budget: dict[str, Any] = {}",
      "a ledger is not bound to the policy's budget: raising the total reuses the old ledger"),
    # --- api/connection.py (short anchor) -------------------------------------------------------------
    M("noise_udf_skips_noise", "dpsql/mechanisms/base.py",
      "out[rows] = CODES[code].add(exact[rows], draws, args)", "out[rows] = exact[rows]",
      "the noise UDF draws noise but releases the exact value"),
    # --- frontend/rules (short anchors) ---------------------------------------------------------------
    M("identifier_alias_exemption", "dpsql/frontend/rules/privacy.py",
      "                and name in aliases and name not in scope.table.columns:",
      "                and name in aliases:",
      "an output alias spelled like an identifier column exempts that column in GROUP BY/HAVING/ORDER BY"),
    M("identifier_check_missing", "dpsql/frontend/rules/privacy.py",
      "if scope.table.is_identifier(name):", "if False and scope.table.is_identifier(name):",
      "identifier columns are accepted anywhere"),
    M("star_outside_count", "dpsql/frontend/rules/structure.py",
      "if type(parent) not in FORMS or not FORMS[type(parent)].star:", "if False:",
      "* is allowed outside COUNT(*)"),
    # --- lower/ (short anchors) -----------------------------------------------------------------------
    M("clamp_upper_plus_one", "dpsql/sql/build.py",
      "else num(float(upper))", "else num(float(upper) + 1)",
      "values are clamped to [lower, upper + 1]: the sensitivity assumed upper"),
    M("clamp_lower_doubled", "dpsql/sql/build.py",
      "else num(float(lower))", "else num(2 * float(lower))",
      "values are clamped to [2*lower, upper]: wider than the bounds for lower < 0"),
    M("count_cap_C_plus_one", "dpsql/plan/exact.py",
      "fn(\"LEAST\", rows, num(C))", "fn(\"LEAST\", rows, num(C + 1))",
      "a unit's count in a partition is capped at C+1"),
    M("distinct_cap_C_plus_one", "dpsql/lower/distinct.py",
      "count=num(plan.max_rows))", "count=num(plan.max_rows + 1))",
      "a unit keeps C+1 distinct values per partition for COUNT(DISTINCT col)"),
    M("noise_scale_halved_in_sql", "dpsql/mechanisms/laplace.py",
      "return t.numerator, t.denominator.bit_length() - 1, 0", "return t.numerator, t.denominator.bit_length(), 0",
      "the SQL asks the noise UDF for half the plan's Laplace scale"),
    M("nonnegative_clamp_on_signed_sums", "dpsql/plan/outputs.py",
      "    if lower >= 0:\n", "    if lower >= 0 or (upper is not None and upper > 0):\n",
      "sums whose bounds allow negative values are released clamped at 0"),
    M("ci_avg_without_union_bound", "dpsql/plan/outputs.py",
      "level = (1 + r.confidence) / 2", "level = r.confidence",
      "AVG's interval from ci-level intervals of sum and count: coverage below ci"),
    M("ci_half_width_too_narrow", "dpsql/plan/outputs.py",
      "error_bound(m.release, confidence) * m.granularity",
      "error_bound(m.release, 2 * confidence - 1) * m.granularity",
      "count/sum intervals at level 2ci-1 (one-sided vs two-sided confusion): coverage below ci"),
    # --- joins, links and lookups (issue 20) -------------------------------------------------------
    M("join_edge_bare_comparison", "dpsql/frontend/joins.py",
      "edge.written = compare(exp.EQ, *operands, node=edge.node, sql=sql)",
      "edge.written = exp.EQ(this=operands[0], expression=operands[2])",
      "a join condition written outside the comparison builder: DATE = TIMESTAMP_NS fails on one person's row"),
    M("correlation_bare_comparison", "dpsql/frontend/semijoins.py",
      "return compare(op, *left, *right, node=node, sql=sql)", "return op(this=left[0], expression=right[0])",
      "an EXISTS/IN correlation written outside the comparison builder"),
    M("fallible_cast_unguarded", "dpsql/sql/compare.py",
      "return Pairing(Form(b, fallible=True), BARE)   # DATE", "return Pairing(Form(b), BARE)   # DATE",
      "the builder casts a DATE to a timestamp type without TRY_CAST: fails past that type's range"),
    M("key_checked_in_its_own_type", "dpsql/sql/compare.py",
      "return found.left if found is not None else None", "return Form() if found is not None else None",
      "a referenced key or a lookup checked unique in its own type, joined in another (BIGINT keys equal as DOUBLE)"),
    M("strings_compared_in_their_collation", "dpsql/sql/compare.py",
      'return Pairing(BYTES, BYTES) if a == "VARCHAR"', 'return Pairing(BARE, BARE) if a == "VARCHAR"',
      "string keys joined in the columns' collation: a NOCASE key meets several persons' rows"),
    M("public_tables_join_freely", "dpsql/frontend/joins.py",
      "public = lookups(instances, edges, sql)", "public = ()",
      "the lookup rule switched off: public tables multiply a person's rows before the caps apply"),
    M("lookup_uniqueness_unchecked", "dpsql/api/connection.py",
      "if not self._engine.unique(lookup.table, lookup.columns, reader, deadline):", "if False:",
      "a public table joined on columns that repeat in it (each row meets several of its rows)"),
    M("quantile_cap_C_plus_one", "dpsql/lower/quantile.py",
      "case_when(exp.LTE(this=n.copy(), expression=num(C)), c.copy(), spread)",
      "case_when(exp.LTE(this=n.copy(), expression=num(C + 1)), c.copy(), spread)",
      "a unit with exactly C+1 values keeps all of them in the quantile tree"),
    # --- issue 20: the second round of leaks ----------------------------------------------------------
    M("identifier_aggregate_in_per_person", "dpsql/frontend/per_person.py",
      "return isinstance(aggregate, exp.Count) and isinstance(argument, exp.Column)",
      "return isinstance(aggregate, (exp.Count, exp.Sum, exp.Avg)) and isinstance(argument, exp.Column)",
      "SUM or AVG of an identifier column let through a per-person subquery (its values released)"),
    M("option_raises_L", "dpsql/frontend/rules/aggregates.py",
      "if options.max_groups is not None and options.max_groups > L:", "if False:",
      "OPTIONS(max_groups_contributed = n) above the policy's L is accepted"),
    M("public_session_keywords", "dpsql/frontend/public.py",
      "node.name.lower() in SQL_VALUE_KEYWORDS and", "False and",
      "bare user / current_schema / current_role reach DuckDB on the public path"),
    # --- issue 28: blind spots -------------------------------------------------------------------------
    M("per_person_where_unguarded", "dpsql/frontend/per_person.py",
      "conditions.append(guarded(narrow_dates(quoted(where.this), types), types))",
      "conditions.append(quoted(where.this))",
      "a per-person subquery's WHERE runs bare: a cast that fails on one person's row fails the query"),
    M("distinct_counts_undeclared", "dpsql/plan/exact.py",
      "    return case_when(reading.declared(m.column), col(m.column), exp.Null())",
      "    return col(m.column)",
      "COUNT(DISTINCT col) of a keyed column counts undeclared values too: past L * min(C, keys)"),
    M("distinct_bytewise_under_collation", "dpsql/plan/exact.py",
      "    return case_when(reading.declared(m.column), col(m.column), exp.Null())",
      "    return exp.Collate(this=case_when(reading.declared(m.column), col(m.column), exp.Null()), "
      "expression=exp.to_identifier(\"binary\", quoted=True))",
      "COUNT(DISTINCT) values compared bytewise while the key test matches under NOCASE: 'a' and 'A' count twice"),
    M("derived_keys_pruned_on_first_value", "dpsql/plan/build.py",
      "declared = {c.name for c in key.columns if c.keys is not None and c.derived is None}",
      "declared = {c.name for c in key.columns if c.keys is not None}",
      "WHERE prunes years or bins on each period's first day or bin's lower end: a period with data dropped"),
    M("public_ignores_cte_names", "dpsql/frontend/public.py",
      "names |= {cte.alias.lower() for cte in statement.find_all(exp.CTE)}", "pass",
      "a CTE named like a private table no longer sends the query to the DP pipeline"),
    # --- free work and shared caches (issue 20, findings 4 and 6) --------------------------------------
    M("output_limit_off", "dpsql/frontend/size.py",
      "    if len(found) > limits.max_outputs:", "    if False:",
      "any number of outputs is planned (3,000 took 10 s of CPU, free with explain)"),
    M("public_rows_unbounded", "dpsql/engines/duckdb.py",
      "            if rows > max_rows:", "            if False:",
      "a public-only answer of any size is read into memory"),
    M("no_interrupt_at_deadline", "dpsql/engines/duckdb.py",
      "                    self.con.interrupt()", "                    pass",
      "a deadline that never stops DuckDB: a slow free query holds the engine for everyone"),
    M("turns_first_come_first_served", "dpsql/engines/turns.py",
      "key=lambda w: self._served.get(w, 0))", "key=lambda w: 0)",
      "the engine's turns in arrival order: an analyst with requests queued keeps the others waiting"),
    M("stopped_charge_reported_free", "dpsql/api/connection.py",
      "raise DeadlineExceeded(\"DP901\"", "raise DeadlineExceeded(\"DP425\"",
      "a DP query stopped after its charge says nothing was spent"),
    M("ledger_record_unbounded", "dpsql/accounting/ledger.py",
      "    if len(text) <= limit:", "    if True:",
      "a zero-cost record keeps the whole SQL text: free queries grow the ledger without bound"),
    M("free_rate_off", "dpsql/server/limits.py",
      "        if tokens < 1:", "        if False:",
      "free requests (explain, public-only queries, refusals) are never counted"),
    M("public_keys_shared_between_analysts", "dpsql/engines/duckdb.py",
      "key = (reader, table, column.public_source)", "key = (None, table, column.public_source)",
      "a public column's keys read once for everyone: the second analyst's plan is faster, telling them"),
    # --- work and memory per person bounded before the caps (issue 20): same answers, unbounded state.
    # Killed by tests/properties/test_heavy_target.py (a heavy person under a memory limit) ------------
    M("distinct_list_uncapped", "dpsql/lower/distinct.py",
      "alias(exp.Min(this=col(v, \"__d\"), count=num(plan.max_rows)), v)).from_(\n"
      "        _subquery(found.distinct(), \"__d\"))",
      "alias(exp.Anonymous(this=\"LIST_SLICE\", expressions=[exp.Anonymous(this=\"LIST_SORT\", expressions=["
      "exp.Anonymous(this=\"LIST_DISTINCT\", expressions=[exp.Anonymous(this=\"LIST\", expressions=[col(v, \"__d\")])])]), "
      "num(1), num(plan.max_rows)]), v)).from_(\n        _subquery(found, \"__d\"))",
      "COUNT(DISTINCT col) builds a list of every value of a person before keeping C of them"),
    M("quantile_leaf_list_uncapped", "dpsql/lower/quantile.py",
      "alias(exp.Count(this=exp.Star()), \"c\"), source=\"__rows\"",
      "alias(fn(\"LEN\", exp.Anonymous(this=\"LIST\", expressions=[leaf.copy()])), \"c\"), source=\"__rows\"",
      "the quantile tree counts a person's values in a leaf by building a list of all of them"),
    M("bounded_window_uncut", "dpsql/lower/bounding.py",
      "return plan.partitions is None or plan.partitions > WINDOW_PARTITIONS", "return False",
      "with private keys, the window choosing a person's L partitions numbers all of their partitions"),
    M("undeclared_partitions_reach_the_window", "dpsql/lower/bounding.py",
      "undeclared = None if domain is None else", "undeclared = None if True else",
      "a person's undeclared partitions are numbered by the window beside the declared ones (ranked after them)"),
]


# --- copies ------------------------------------------------------------------------------------------

def source_files(root: Path) -> list[str]:
    """Tracked and untracked files that git does not ignore (read-only git call), that exist."""
    out = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "-c", "-o", "--exclude-standard"],
                         check=True, capture_output=True).stdout.decode()
    return sorted({p for p in out.split("\0") if p and (root / p).is_file()})


def snapshot(root: Path, dest: Path) -> None:
    for rel in source_files(root):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, target)


def clone(snap: Path, dest: Path) -> None:
    shutil.copytree(snap, dest, ignore=shutil.ignore_patterns("__pycache__", ".hypothesis"))


def anchor_count(snap: Path, m: Mutant) -> int:
    path = snap / m.file
    return path.read_text().count(m.old) if path.is_file() else 0


def apply(copy: Path, m: Mutant) -> None:
    path = copy / m.file
    text = path.read_text()
    assert text.count(m.old) == 1
    path.write_text(text.replace(m.old, m.new, 1))


# --- running pytest ----------------------------------------------------------------------------------

def environment(copy: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(copy)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.pop("PYTEST_ADDOPTS", None)
    return env


def imports_own_dpsql(copy: Path) -> str | None:
    """None if ``import dpsql`` in the copy's environment loads the copy; else where it came from."""
    out = subprocess.run([sys.executable, "-c", "import dpsql; print(dpsql.__file__)"], cwd=copy,
                         env=environment(copy), capture_output=True, text=True, timeout=120)
    where = out.stdout.strip()
    if out.returncode != 0:
        return f"import failed: {out.stderr.strip().splitlines()[-1] if out.stderr.strip() else out.returncode}"
    return None if Path(where).resolve().is_relative_to(copy.resolve()) else where


_children: set[int] = set()
_children_lock = threading.Lock()


def run_pytest(copy: Path, args: list[str], timeout: float, exit_first: bool = True) -> tuple[str, float, str]:
    """('passed' | 'failed' | 'timeout', seconds, output)."""
    command = PYTEST + args if exit_first else [a for a in PYTEST if a != "-x"] + args
    start = time.monotonic()
    proc = subprocess.Popen(command, cwd=copy, env=environment(copy), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    with _children_lock:
        _children.add(proc.pid)
    try:
        output, _ = proc.communicate(timeout=timeout)
        status = "passed" if proc.returncode == 0 else "failed"
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)   # the process group this script started, by its id
        output, _ = proc.communicate()
        status = "timeout"
    finally:
        with _children_lock:
            _children.discard(proc.pid)
    if status == "failed" and proc.returncode in (4, 5):
        status = "error"   # usage error / no tests collected: the arguments are wrong, not a kill
    return status, time.monotonic() - start, output


def failing_tests(output: str) -> list[str]:
    """Node ids from pytest's short summary (-rfE): ``FAILED <node id> - <message>``."""
    found = re.findall(r"^(?:FAILED|ERROR) (.+?)(?: - .*)?$", output, re.M)
    return list(dict.fromkeys(found))


@dataclasses.dataclass
class Outcome:
    mutant: Mutant
    status: str               # killed, survived, timeout, does not apply, error
    seconds: float = 0.0
    by: list[str] = dataclasses.field(default_factory=list)
    note: str = ""


# Tests that compare text (the rewritten SQL byte for byte, the docs' examples): a mutant only they
# kill changes the SQL but no behaviour any test checks (--goldens-apart lists such mutants).
TEXT_TESTS = ["tests/contracts/test_golden.py", "tests/contracts/test_docs.py"]


def run_mutant(m: Mutant, snap: Path, work: Path, args: list[str], timeout: float,
               goldens_apart: bool = False) -> Outcome:
    count = anchor_count(snap, m)
    if count != 1:
        return Outcome(m, "does not apply", note=f"anchor found {count} times in {m.file}: {m.old.strip()[:70]!r}")
    copy = work / m.name
    clone(snap, copy)
    try:
        apply(copy, m)
        if goldens_apart:
            args = args + [f"--ignore={t}" for t in TEXT_TESTS]
        status, seconds, output = run_pytest(copy, args, timeout)
        result = {"failed": "killed", "passed": "survived"}.get(status, status)
        note = ""
        if status == "error":
            note = output.strip().splitlines()[-1] if output.strip() else "pytest error"
        if goldens_apart and result == "survived":
            status, more, text_output = run_pytest(copy, TEXT_TESTS, timeout)
            seconds += more
            if status == "failed":
                return Outcome(m, "goldens only", seconds, failing_tests(text_output),
                               "only the text of the SQL or the docs noticed: add a behavioural test")
        return Outcome(m, result, seconds, failing_tests(output), note)
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def write_json(path: str, outcomes: list[Outcome]) -> None:
    Path(path).write_text(json.dumps([{"name": o.mutant.name, "file": o.mutant.file, "status": o.status,
                                       "seconds": round(o.seconds, 1), "killed_by": o.by, "note": o.note,
                                       "description": o.mutant.description} for o in outcomes], indent=2))


# --- main ---------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--list", action="store_true", help="list the mutants (and whether each applies)")
    parser.add_argument("--only", action="append", default=[], metavar="NAME",
                        help="run only this mutant (repeatable; a comma-separated list works too)")
    parser.add_argument("--jobs", type=int, default=1, help="mutants run in parallel (default 1)")
    parser.add_argument("--timeout", type=float, default=1200.0, help="seconds per mutant (default 1200)")
    parser.add_argument("--pytest-args", default="", metavar="ARGS",
                        help='extra pytest arguments for every run, e.g. "-k sensitivity" or a test file')
    parser.add_argument("--baseline-args", default=None, metavar="ARGS",
                        help="pytest arguments for the unmutated baseline run (default: --pytest-args)")
    parser.add_argument("--no-baseline", action="store_true", help="skip the unmutated baseline run")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    parser.add_argument("--root", default=str(ROOT), help="repository to copy (default: this one)")
    parser.add_argument("--goldens-apart", action="store_true",
                        help="run without the golden-file and docs tests; a survivor is then run against those "
                             "alone and listed as 'goldens only' if they kill it (the kill rate counts behaviour)")
    opts = parser.parse_args(argv)

    def interrupted(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, interrupted)   # so the temporary copies and pytest children go too
    try:
        return _main(opts, parser)
    except KeyboardInterrupt:
        with _children_lock:
            for pid in list(_children):
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        print("interrupted", file=sys.stderr)
        return 130


def _main(opts, parser) -> int:
    root = Path(opts.root).resolve()
    names = [n for item in opts.only for n in item.split(",") if n]
    unknown = [n for n in names if n not in {m.name for m in MUTANTS}]
    if unknown:
        parser.error(f"unknown mutant(s): {', '.join(unknown)} (see --list)")
    if len({m.name for m in MUTANTS}) != len(MUTANTS):
        parser.error("two mutants share a name")
    chosen = [m for m in MUTANTS if not names or m.name in names]
    args = shlex.split(opts.pytest_args)
    baseline_args = args if opts.baseline_args is None else shlex.split(opts.baseline_args)

    with tempfile.TemporaryDirectory(prefix="dpsql-mutants-", ignore_cleanup_errors=True) as tmp:
        work = Path(tmp)
        snap = work / "_snapshot"
        snapshot(root, snap)   # one snapshot: every mutant sees the same source, however main moves on

        if opts.list:
            for m in chosen:
                count = anchor_count(snap, m)
                state = "ok" if count == 1 else "DOES NOT APPLY" if count == 0 else f"AMBIGUOUS ({count}x)"
                print(f"{m.name:34} {m.file:22} {state:15} {m.description}")
            return 0 if all(anchor_count(snap, m) == 1 for m in chosen) else 1

        base = work / "_baseline"
        clone(snap, base)
        wrong = imports_own_dpsql(base)
        if wrong is not None:
            print(f"ABORT: the copy does not import its own dpsql ({wrong}); mutants would test the wrong code")
            return 2
        print(f"copy imports its own dpsql: {base / 'dpsql' / '__init__.py'}", flush=True)
        if not opts.no_baseline:
            print(f"baseline: pytest {' '.join(baseline_args) or '(default suite)'} on the unmutated copy ...",
                  flush=True)
            status, seconds, output = run_pytest(base, baseline_args, opts.timeout, exit_first=False)
            if status != "passed":
                print(f"ABORT: the baseline {status} after {seconds:.0f} s; failing tests:")
                for test in failing_tests(output) or ["(none named)"]:
                    print(f"  {test}")
                print("\n".join(output.strip().splitlines()[-15:]))
                print("Deselect them (--baseline-args/--pytest-args \"--deselect ...\"), or wait for their fix.")
                return 2
            print(f"baseline passed in {seconds:.0f} s", flush=True)
        shutil.rmtree(base, ignore_errors=True)

        outcomes: list[Outcome] = []

        def report(o: Outcome) -> None:
            by = f" by {o.by[0]}" if o.by else ""
            note = f" ({o.note})" if o.note else ""
            print(f"{o.status.upper():15} {o.mutant.name:34} {o.seconds:6.0f} s{by}{note}", flush=True)
            if opts.json:   # after every mutant, so an interrupted run keeps what it found
                write_json(opts.json, outcomes)

        pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, opts.jobs))
        try:
            futures = [pool.submit(run_mutant, m, snap, work, args, opts.timeout, opts.goldens_apart)
                       for m in chosen]
            for future in concurrent.futures.as_completed(futures):
                outcome = future.result()
                outcomes.append(outcome)
                report(outcome)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    order = {m.name: i for i, m in enumerate(MUTANTS)}
    outcomes.sort(key=lambda o: order[o.mutant.name])
    applicable = [o for o in outcomes if o.status in ("killed", "survived", "timeout")]
    killed = [o for o in applicable if o.status in ("killed", "timeout")]
    print("\nmutant                             result          description")
    for o in outcomes:
        print(f"{o.mutant.name:34} {o.status:15} {o.mutant.description}")
    applicable += [o for o in outcomes if o.status == "goldens only"]
    rate = len(killed) / len(applicable) if applicable else 0.0
    apart = " with the golden-file and docs tests left out" if opts.goldens_apart else ""
    print(f"\nkill rate{apart}: {len(killed)}/{len(applicable)} = {rate:.0%}"
          f" ({sum(o.status == 'timeout' for o in outcomes)} by timeout)")
    for o in outcomes:
        if o.status == "goldens only":
            print(f"!! {o.mutant.name}: killed only by {', '.join(o.by) or 'the text tests'}")
    broken = [o for o in outcomes if o.status in ("does not apply", "error")]
    for o in broken:
        print(f"!! {o.mutant.name}: {o.status.upper()}: {o.note}")
    if opts.json:
        write_json(opts.json, outcomes)
    return 0 if len(killed) == len(outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
