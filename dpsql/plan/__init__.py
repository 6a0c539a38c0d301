"""Plan: the typed, immutable model of what a query releases (measurements with their sensitivity,
mechanism and budget share; outputs as post-processing), how it is built from a checked query, the
sensitivities (each a proven bound), and the explain text."""
