"""Shared fixtures: the fixture database (tests/support/fixture.py, in memory), its policy, and a private
connection over it. Helpers that tests import live in tests/support/, never here: conftest.py is
pytest's, and no test imports it."""
import copy
import os

import numpy as np
import pytest

import dpsql
from tests.support.fixture import POLICY, make_database

# pytest-xdist's workers (pytest -n 2) export COLUMNS=80 and LINES=24; the CLI takes $COLUMNS for a
# terminal's width, so its tests run without them, as in one process.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.pop("COLUMNS", None)
    os.environ.pop("LINES", None)


@pytest.fixture
def policy():
    return copy.deepcopy(POLICY)


@pytest.fixture
def raw():
    """The owner's unrestricted connection (for exact answers in tests)."""
    return make_database()


@pytest.fixture
def db(raw, policy):
    """A private connection over ``raw`` with a seeded generator (trusted test API)."""
    return dpsql.connect(raw, ledger=":memory:", policy=policy, rng=np.random.default_rng(20261125))

