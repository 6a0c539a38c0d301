"""Mechanisms: the noise. Discrete Laplace sampled exactly from the OS CSPRNG (Canonne-Kamath-Steinke
2020), its calibration on a dyadic scale, tails and confidence bounds."""
