"""Where noise gets its randomness: unbiased uniform integers from the OS CSPRNG (the default and the
only source fit for real releases), or a seeded numpy Generator (trusted in-process tests only)."""
from __future__ import annotations

import os
from typing import Protocol, runtime_checkable
import numpy as np


_BATCH_WORDS = 4096      # small requests are served from one 32 KiB os.urandom read
_NARROW = 2**26          # bounds up to this are drawn from 32-bit words


@runtime_checkable
class RandomSource(Protocol):
    """Where noise gets its randomness: unbiased uniform integers, elementwise."""

    def below(self, n: np.ndarray) -> np.ndarray:
        """Elementwise uniform integers in [0, n) (n: int64/uint64 array, all >= 1), unbiased."""
        ...


def check_bounds(n) -> np.ndarray:
    """Validate ``below``'s argument: an int64/uint64 array with every element >= 1.

    >>> check_bounds(np.array([1, 5])).dtype
    dtype('int64')
    """
    n = np.asarray(n)
    if n.dtype != np.uint64:
        if n.dtype.kind not in "iu":
            raise TypeError(f"below() needs an integer array, got dtype {n.dtype}")
        n = n.astype(np.int64)
    if n.size and n.min() < 1:
        raise ValueError(f"below() needs every bound >= 1, got minimum {n.min()}")
    return n


class SystemRandomSource:
    """Unbiased uniform integers from ``os.urandom`` (the OS CSPRNG): the default, and the only
    source fit for real releases. Not thread-safe: give each thread its own.

    >>> out = SystemRandomSource().below(np.array([1, 10, 2**62]))
    >>> bool(out[0] == 0 and out[1] < 10 and out[2] < 2**62)
    True
    """

    def __init__(self) -> None:
        self._buffer = np.empty(0, dtype=np.uint64)
        self._pid = os.getpid()

    def _words(self, m: int) -> np.ndarray:
        """``m`` uniform uint64 words; small requests share one buffered read to save syscalls."""
        if m >= _BATCH_WORDS:
            return np.frombuffer(os.urandom(8 * m), dtype=np.uint64)
        # A forked child inherits the buffer: drop it, or parent and child would draw equal noise.
        if m > self._buffer.size or os.getpid() != self._pid:
            self._buffer = np.frombuffer(os.urandom(8 * _BATCH_WORDS), dtype=np.uint64)
            self._pid = os.getpid()
        words, self._buffer = self._buffer[:m], self._buffer[m:]
        return words

    def _uniform(self, bound: np.ndarray) -> np.ndarray:
        """Uniform integers in [0, bound) of bound's width (uint32 or uint64), by modulo with rejection.

        A uint32 request reads whole uint64 words and uses their halves (the unused half of an odd
        request is dropped, never read twice)."""
        halves = 8 // bound.itemsize

        def words(m: int) -> np.ndarray:
            return self._words(-(-m // halves)).view(bound.dtype)[:m]
        # Accept x only if the whole block of n values containing x fits below 2**width: then x % n
        # is exactly uniform (no modulo bias). Unsigned arithmetic wraps, so 0 - n is 2**width - n.
        top = bound.dtype.type(0) - bound
        drawn = words(bound.size)
        out = drawn % bound
        rejected = np.flatnonzero(drawn - out > top)
        while rejected.size:  # probability < n / 2**width per element
            drawn = words(rejected.size)
            redo = drawn % bound[rejected]
            ok = drawn - redo <= top[rejected]
            out[rejected[ok]] = redo[ok]
            rejected = rejected[~ok]
        return out

    def below(self, n: np.ndarray) -> np.ndarray:
        """Elementwise uniform integers in [0, n): bounds all up to 2**26 from 32 bits each (half
        the OS bytes; a draw is rejected with probability < 2**-6), others from 64 bits.

        >>> SystemRandomSource().below(np.ones(3, dtype=np.int64)).tolist()
        [0, 0, 0]
        """
        n = check_bounds(n)
        bound = np.ascontiguousarray(n).reshape(-1).view(np.uint64)  # n >= 1, so the view is exact
        if bound.size and bound.max() <= _NARROW:
            out = self._uniform(bound.astype(np.uint32)).astype(np.uint64)
        else:
            out = self._uniform(bound)
        return out.view(n.dtype).reshape(n.shape)


class GeneratorRandomSource:
    """Uniform integers from a seeded numpy ``Generator``: for reproducible tests only, since
    PCG64's state can be recovered from its outputs.

    >>> GeneratorRandomSource(np.random.default_rng(0)).below(np.array([1, 1])).tolist()
    [0, 0]
    """

    def __init__(self, generator: np.random.Generator):
        if not isinstance(generator, np.random.Generator):
            raise TypeError(f"GeneratorRandomSource needs a numpy Generator, got {type(generator).__name__}")
        self.generator = generator

    def below(self, n: np.ndarray) -> np.ndarray:
        """Elementwise uniform integers in [0, n) via ``Generator.integers`` (unbiased rejection)."""
        n = check_bounds(n)
        if n.size == 0:
            return np.empty(n.shape, dtype=n.dtype)
        return self.generator.integers(0, n, dtype=n.dtype)


def as_random_source(rng: np.random.Generator | RandomSource | None) -> RandomSource:
    """Normalise the ``rng`` argument of the public API into a RandomSource.

    Args:
        rng: None for the OS CSPRNG (use this for real releases), a numpy ``Generator`` (tests
            only), or any object with a ``below`` method.

    Raises:
        TypeError: for anything else (notably the legacy ``np.random.RandomState``).

    Example:
        >>> type(as_random_source(None)).__name__
        'SystemRandomSource'
    """
    if rng is None:
        return SystemRandomSource()
    if isinstance(rng, np.random.Generator):
        return GeneratorRandomSource(rng)
    if isinstance(rng, RandomSource):
        return rng
    raise TypeError(f"rng must be None, a numpy Generator or a RandomSource, got {type(rng).__name__}")
