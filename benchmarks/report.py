"""Tables (Markdown) and plots (PNG) from the dict that ``run.run`` returns."""
from __future__ import annotations

from pathlib import Path

SYSTEM_NAMES = {"plain": "plain DuckDB", "floor": "floor", "dpsql": "dpsql", "smartnoise": "SmartNoise SQL (DuckDB)",
                "smartnoise_pandas": "SmartNoise SQL (pandas)"}
ROW_LEVEL = ("count_sum_avg", "groups_10k", "where", "median")
TARGET_ROWS = 10_000_000


def _wall(row: dict, system: str) -> float | None:
    return row.get(system, {}).get("wall")


def _ratio(a, b) -> str:
    return f"{a / b:.2f}x" if a and b else "n/a"


def _seconds(row: dict, system: str) -> str:
    m = row.get(system, {})
    return f"{m['wall']:.3f}" if "wall" in m else "failed" if "error" in m else "n/a"


def _mb(row: dict, system: str) -> str:
    m = row.get(system, {})
    return f"{m['peak_mb']:.0f}" if m.get("peak_mb") is not None else "n/a"


def _markdown(header: list[str], rows: list[list[str]], failures: list[str], failed: str) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    if failures:
        lines += ["", failed, *[f"- {f}" for f in sorted(set(failures))]]
    return "\n".join(lines)


def speed_table(report: dict) -> str:
    header = ["rows", "query", "plain s", "floor s", "dpsql s", "SmartNoise s", "dpsql/plain", "dpsql/floor",
              "SmartNoise/dpsql", "SmartNoise (pandas) s", "peak MB plain / floor / dpsql / SmartNoise",
              "dpsql/plain memory", "dpsql/floor memory"]
    rows = []
    for row in report["speed"]:
        plain, floor, dp, sn = (_wall(row, s) for s in ("plain", "floor", "dpsql", "smartnoise"))
        mem = [row.get(s, {}).get("peak_mb") for s in ("plain", "dpsql", "floor")]
        rows.append([f"{row['rows']:,}", row["query"], *(_seconds(row, s) for s in ("plain", "floor", "dpsql", "smartnoise")),
                     _ratio(dp, plain), _ratio(dp, floor), _ratio(sn, dp), _seconds(row, "smartnoise_pandas"),
                     " / ".join(_mb(row, s) for s in ("plain", "floor", "dpsql", "smartnoise")),
                     _ratio(mem[1], mem[0]), _ratio(mem[1], mem[2])])
    failures = [f"{row['query']} ({s}): {row[s]['error']}" for row in report["speed"]
                for s in SYSTEM_NAMES if "error" in row.get(s, {})]
    return _markdown(header, rows, failures, "Could not answer:")


def _num(x, fmt=".4g") -> str:
    return "n/a" if x is None else format(x, fmt)


def accuracy_table(report: dict) -> str:
    header = ["query", "column", "epsilon", "dpsql RMSE", "SmartNoise RMSE", "dpsql median rel. error",
              "SmartNoise median rel. error", "groups released dpsql / SmartNoise",
              "dpsql RMSE / Laplace optimum (expected)"]
    rows = []
    for row in report["accuracy"]:
        dp, sn, lap = row["dpsql"] or {}, row["smartnoise"] or {}, row["laplace"]
        ratio = (f"{dp['ratio_to_optimum']:.3f} ({lap['dpsql_expected_rmse'] / lap['optimum_rmse']:.3f})"
                 if lap and dp.get("ratio_to_optimum") else "n/a")
        rows.append([row["query"], row["column"], f"{row['epsilon']:g}", _num(dp.get("rmse")), _num(sn.get("rmse")),
                     _num(dp.get("median_relative"), ".2%"), _num(sn.get("median_relative"), ".2%"),
                     f"{_num(dp.get('released'), '.0%')} / {_num(sn.get('released'), '.0%')}", ratio])
    failures = [f"{row['query']}: {row['smartnoise_error']}" for row in report["accuracy"] if row.get("smartnoise_error")]
    return _markdown(header, rows, failures, "SmartNoise could not answer:")


def targets(report: dict) -> list[tuple[str, str, bool | None]]:
    """(target, measured, met) at 10M rows (or the largest size run below that)."""
    sizes = sorted({r["rows"] for r in report["speed"]})
    if not sizes:
        return []
    size = max([s for s in sizes if s <= TARGET_ROWS] or sizes)
    rows = {r["query"]: r for r in report["speed"] if r["rows"] == size}
    out = []

    def add(name, values, limit, fmt="{:.2f}x", below=True, where=f" at {size:,} rows"):
        values = [v for v in values if v is not None]
        if not values:
            out.append((name, "not measured", None))
            return
        worst = max(values) if below else min(values)
        out.append((name, f"worst {fmt.format(worst)}{where}", worst <= limit if below else worst >= limit))

    def ratio(query, a, b):
        r = rows.get(query, {})
        return _wall(r, a) / _wall(r, b) if _wall(r, a) and _wall(r, b) else None

    add("row level <= 1.1x floor", [ratio(q, "dpsql", "floor") for q in ROW_LEVEL if q != "median"], 1.1)
    add("user level <= 1.5x floor", [ratio("user_level", "dpsql", "floor")], 1.5)
    add(">= 10x faster than SmartNoise SQL on our DuckDB adapter", [ratio(q, "smartnoise", "dpsql") for q in rows],
        10, below=False)
    add(">= 10x faster than SmartNoise SQL with its pandas reader",
        [ratio(q, "smartnoise_pandas", "dpsql") for q in rows], 10, below=False)
    wide = rows.get("groups_1m", {})
    add("1M output groups noised in < 1 s (dpsql minus floor)",
        [(_wall(wide, "dpsql") - _wall(wide, "floor")) if _wall(wide, "dpsql") and _wall(wide, "floor") else None],
        1.0, "{:.3f} s")
    mem = [r.get("dpsql", {}).get("peak_mb") / r["plain"]["peak_mb"] for r in rows.values()
           if r.get("dpsql", {}).get("peak_mb") and r.get("plain", {}).get("peak_mb")]
    add("peak memory <= 1.5x plain DuckDB", mem, 1.5)
    add("accuracy: dpsql RMSE <= 1.05x Laplace optimum (expected, from the noise actually drawn)",
        [a["laplace"]["dpsql_expected_rmse"] / a["laplace"]["optimum_rmse"] for a in report["accuracy"]
         if a["laplace"]], 1.05, "{:.3f}", where="")
    pooled = pooled_ratio(report)
    if pooled:
        ratio, half = pooled
        out.append(("accuracy, measured: dpsql RMSE / Laplace optimum over every row-level count and sum",
                    f"{ratio:.3f} +- {half:.3f} (95%)", ratio - half <= 1.05))
    return out


def pooled_ratio(report: dict) -> tuple[float, float] | None:
    """sqrt(sum of squared errors / sum of optimum variances) over every cell with a Laplace optimum,
    and the half-width of its 95% interval (delta method over the per-row standard errors)."""
    rows = [a for a in report["accuracy"] if a["laplace"] and a["dpsql"] and a["dpsql"].get("sum_sq_clamped")]
    if not rows:
        return None
    expected = sum(a["dpsql"]["cells"] * a["laplace"]["optimum_rmse"] ** 2 for a in rows)
    ratio = (sum(a["dpsql"]["sum_sq_clamped"] for a in rows) / expected) ** 0.5
    # Var of the sum of squares: per row (2 * rel_se * mean square * cells)^2.
    var = sum((2 * (a["dpsql"]["rmse_clamped_rel_se"] or 0) * a["dpsql"]["sum_sq_clamped"]) ** 2 for a in rows)
    return ratio, 1.96 * ratio * var ** 0.5 / (2 * sum(a["dpsql"]["sum_sq_clamped"] for a in rows))


def markdown(report: dict) -> str:
    m = report["machine"]
    parts = [f"Machine: {m['description']}; SmartNoise SQL {m['smartnoise'] or 'not installed'}.",
             f"{report['load_before']} before, {report.get('load_after', '?')} after;"
             f" {report['repeats']} timed runs per system (medians), {report['runs']} answers per epsilon.",
             "", "### Targets", "", "| target | measured | met |", "|---|---|---|"]
    parts += [f"| {name} | {value} | {'yes' if ok else 'NO' if ok is not None else 'n/a'} |"
              for name, value, ok in targets(report)]
    parts += ["", "### Speed and peak memory (wall-clock medians)", "", speed_table(report)]
    if report["accuracy"]:
        parts += ["", f"### Accuracy ({report.get('accuracy_rows', 0):,} rows)", "", accuracy_table(report)]
    return "\n".join(parts) + "\n"


COLOURS = {"plain": "0.5", "floor": "0.2", "dpsql": "tab:blue", "smartnoise": "tab:orange",
           "smartnoise_pandas": "tab:red"}


def _figure(panels: list, draw, ylabel: str, path: Path, cols: int = 4) -> Path:
    """One small log-log chart per panel, ``cols`` to a row, saved as PNG."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.3 * cols, 2.9 * rows), squeeze=False)
    for ax, panel in zip(axes.flat, panels):
        draw(ax, panel)
        ax.set(xscale="log", yscale="log")
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    axes[0][0].set_ylabel(ylabel)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plots(report: dict, out: Path) -> list[Path]:
    """time_vs_rows.png (one chart per query) and error_vs_epsilon.png (one per query and column)."""
    written = []

    def speed(ax, query):
        rows = [r for r in report["speed"] if r["query"] == query]
        for system, colour in COLOURS.items():
            points = [(r["rows"], _wall(r, system)) for r in rows if _wall(r, system)]
            if points:
                ax.plot(*zip(*points), marker="o", color=colour, label=SYSTEM_NAMES[system])
        ax.set(title=query, xlabel="rows")

    def error(ax, panel):
        rows = [a for a in report["accuracy"] if (a["query"], a["column"]) == panel]
        for system in ("dpsql", "smartnoise"):
            points = [(a["epsilon"], a[system]["rmse"]) for a in rows if a[system] and a[system]["rmse"]]
            if points:
                ax.plot(*zip(*points), marker="o", color=COLOURS[system], label=SYSTEM_NAMES[system])
        optimum = [(a["epsilon"], a["laplace"]["optimum_rmse"]) for a in rows if a["laplace"]]
        if optimum:
            ax.plot(*zip(*optimum), linestyle="--", color="0.3", label="Laplace optimum")
        ax.set(title=f"{panel[0]}: {panel[1]}", xlabel="epsilon")

    queries = list(dict.fromkeys(r["query"] for r in report["speed"]))
    if queries:
        written.append(_figure(queries, speed, "seconds (median)", out / "time_vs_rows.png"))
    panels = list(dict.fromkeys((a["query"], a["column"]) for a in report["accuracy"]))
    if panels:
        written.append(_figure(panels, error, "RMSE", out / "error_vs_epsilon.png"))
    return written
