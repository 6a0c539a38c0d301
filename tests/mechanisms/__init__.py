"""Tests of dpsql/mechanisms/: the discrete Laplace sampler, and the noise the engine actually adds."""
