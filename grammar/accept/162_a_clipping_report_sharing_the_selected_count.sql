SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(delta = 1e-6, report_clipping = true) cost, COUNT(*) AS n FROM visits GROUP BY cost
