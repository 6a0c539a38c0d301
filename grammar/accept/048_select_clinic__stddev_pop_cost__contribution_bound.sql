SELECT clinic, STDDEV_POP(cost, contribution_bounds_per_row => (0, 20)) FROM visits GROUP BY clinic
