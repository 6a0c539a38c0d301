"""TPC-H data for the yardstick: generated once per scale factor with `tpchgen-cli`, loaded into DuckDB.

    data/sf<SF>/parquet/<table>.parquet   what tpchgen-cli writes
    data/sf<SF>/tpch.duckdb               the eight tables, loaded from those files

Both are cached (``data/`` is git-ignored) and rebuilt only when missing.

>>> sf_label(0.1), sf_label(1.0), sf_label(0.01)
('0.1', '1', '0.01')
"""
from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import duckdb

HERE = Path(__file__).resolve().parent
DATA_DIR = HERE / "data"
TABLES = ("region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem")


def sf_label(sf: float) -> str:
    """The scale factor as tpchgen-cli and the cache directory spell it (no trailing zeros)."""
    return f"{sf:.6f}".rstrip("0").rstrip(".")


def generate(sf: float, out: Path, log=print) -> None:
    """Write the eight tables as Parquet into ``out`` with tpchgen-cli (``pip install tpchgen-cli``)."""
    exe = shutil.which("tpchgen-cli")
    if exe is None:
        raise SystemExit("tpchgen-cli is not installed: python3 -m pip install tpchgen-cli")
    out.mkdir(parents=True, exist_ok=True)
    log(f"generating TPC-H SF {sf_label(sf)} with tpchgen-cli into {out}")
    started = time.perf_counter()
    subprocess.run([exe, "parquet", "--scale-factor", sf_label(sf), "--output-dir", str(out),
                    "--overwrite", "--no-progress", "--quiet"], check=True)
    log(f"  generated in {time.perf_counter() - started:.1f} s")


def ensure_database(sf: float, data_dir: Path = DATA_DIR, log=print) -> Path:
    """The DuckDB file holding TPC-H at scale factor ``sf``; generated and loaded if missing."""
    base = data_dir / f"sf{sf_label(sf)}"
    db_file = base / "tpch.duckdb"
    if db_file.exists():
        return db_file
    parquet = base / "parquet"
    if not all((parquet / f"{t}.parquet").exists() for t in TABLES):
        generate(sf, parquet, log)
    started = time.perf_counter()
    partial = db_file.with_suffix(".loading")
    partial.unlink(missing_ok=True)
    con = duckdb.connect(str(partial))
    try:
        for table in TABLES:
            con.execute(f"CREATE TABLE {table} AS SELECT * FROM read_parquet(?)", [str(parquet / f"{table}.parquet")])
        con.execute("CHECKPOINT")
    finally:
        con.close()
    partial.rename(db_file)   # only a complete file is ever found by the check above
    log(f"loaded {db_file} in {time.perf_counter() - started:.1f} s")
    return db_file


def connect_private(sf: float, policy: Path, data_dir: Path = DATA_DIR, log=print):
    """(dpsql connection, its DuckDB threads) on TPC-H at ``sf`` under ``policy``, an in-memory ledger."""
    import dpsql
    from dpsql import testing

    db = dpsql.connect(str(ensure_database(sf, data_dir, log)), policy=str(policy), ledger=":memory:")
    threads = testing.duckdb_connection(db).sql("select current_setting('threads')").fetchall()[0][0]
    return db, threads


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="Generate and load TPC-H data into DuckDB (cached).")
    parser.add_argument("--sf", type=float, default=1.0, help="scale factor (default 1; 0.01 or 0.1 for quick runs)")
    print(ensure_database(parser.parse_args().sf))
