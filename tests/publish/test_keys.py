"""The owner's key for a release's published digests (publish/keys.py): made once beside the ledger, mode
0600, the same for every later run; a dry run makes none."""
from __future__ import annotations

import stat

import pytest

from dpsql.publish.keys import keyed, release_key


def test_the_key_is_made_once_beside_the_ledger_readable_by_the_owner_only(tmp_path):
    ledger = tmp_path / "budget.sqlite"
    assert release_key(ledger, make=False) is None and not list(tmp_path.iterdir())
    key = release_key(ledger)
    path = tmp_path / "budget.sqlite.publish-key"
    assert [p.name for p in tmp_path.iterdir()] == [path.name] and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert release_key(ledger) == release_key(ledger, make=False) == key and len(key) == 32
    assert keyed(key, "v") != keyed(release_key(tmp_path / "other.sqlite"), "v")


def test_a_file_that_is_not_a_key_is_refused(tmp_path):
    (tmp_path / "b.sqlite.publish-key").write_bytes(b"short")
    with pytest.raises(OSError, match="not a dpsql publish key"):
        release_key(tmp_path / "b.sqlite")
