-- expect: DP310
SELECT COUNT(*, contribution_bounds_per_group => (0, 2.5)) FROM visits
