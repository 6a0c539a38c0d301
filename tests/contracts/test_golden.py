"""dpsql's planning and rewriting, byte for byte, against the golden files of tests/golden/.

The files are written by tools/golden.py (its docstring describes them and their placeholders). A
failure here means the explain text, the rewritten SQL or a replay-key ingredient changed: if the
change is intended, regenerate with `python3 tools/golden.py`, review the diff, and explain it in the
commit message.
"""
import importlib.util
import sys

import pytest

from tests.support.paths import TOOLS

TOOL = TOOLS / "golden.py"
_SPEC = importlib.util.spec_from_file_location("_golden_tool", TOOL)
golden = sys.modules[_SPEC.name] = importlib.util.module_from_spec(_SPEC)   # dataclasses need it
_SPEC.loader.exec_module(golden)

MAX_DIFF_LINES = 80
HOW = (f"If the change is intended, regenerate with `{golden.REGENERATE}`, review the diff, and explain it "
       "in the commit message.")


@pytest.fixture(scope="module")
def db():
    con = golden.connect()
    yield con
    con.close()


CASES = {case.stem: case for case in golden.cases()}


def truncated(text: str) -> str:
    lines = text.splitlines()
    more = len(lines) - MAX_DIFF_LINES
    return "\n".join(lines[:MAX_DIFF_LINES] + ([f"... ({more} more diff lines)"] if more > 0 else []))


@pytest.mark.parametrize("stem", list(CASES))
def test_golden(db, stem):
    old, new = golden.stored(stem), golden.render(db, CASES[stem])
    if old == new:
        return
    if old is None:
        pytest.fail(f"tests/golden/{stem}.txt does not exist. {HOW}", pytrace=False)
    pytest.fail(f"tests/golden/{stem}.txt differs from the current behaviour:\n"
                f"{truncated(golden.diff(stem, old, new))}\n{HOW}", pytrace=False)


def test_no_stale_golden_file():
    stale = [p.name for p in golden.stale()]
    assert not stale, f"golden files without a query in grammar/accept or tools/golden.py EXTRAS: {stale}. {HOW}"
