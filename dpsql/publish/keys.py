"""What a published manifest may say about the data's version and a statistic's replay key: keyed
digests, never the values themselves.

The data version (engines/versions.py) of small source files is the SHA-256 of their bytes, and a
replay key hashes the data version: each is a fixed function of the private data. Published as is,
someone who knows every row but one could hash each guess of that row and compare (a hash is not
noisy). An HMAC under a secret the owner keeps beside the ledger (``<ledger>.publish-key``, made once,
mode 0600) tells the owner's runs apart as well (equal data, equal digest) and tells an outsider
nothing. A ledger in memory has no file: its key lives as long as this process.

>>> keyed(b"k" * 32, "v") == keyed(b"k" * 32, "v") != keyed(b"j" * 32, "v")
True
"""
from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

KEY_BYTES = 32
_IN_MEMORY = secrets.token_bytes(KEY_BYTES)   # a ledger without a file: this process's key


def keyed(key: bytes, value: str) -> str:
    return "hmac-sha256:" + hmac.new(key, value.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


def release_key(ledger_path: str | os.PathLike | None, *, make: bool = True) -> bytes | None:
    """The owner's secret beside the ledger, made on first use: written whole under a temporary name,
    then linked into place (two jobs racing keep the first; neither reads half a key). ``make=False``
    (a dry run writes nothing): None when there is none yet."""
    if ledger_path is None or str(ledger_path) == ":memory:":
        return _IN_MEMORY
    path = Path(f"{ledger_path}.publish-key")
    if not path.exists() and not make:
        return None
    if not path.exists():
        temporary = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(secrets.token_bytes(KEY_BYTES))
                f.flush()
                os.fsync(f.fileno())
            os.link(temporary, path)
        except FileExistsError:
            pass
        finally:
            temporary.unlink(missing_ok=True)
    key = path.read_bytes()
    if len(key) != KEY_BYTES:
        raise OSError(f"{path} is not a dpsql publish key ({len(key)} bytes, not {KEY_BYTES})")
    return key
