SELECT COUNT(*, contribution_bounds_per_group => (1000000000000000, 1000000000000000)) FROM visits
