-- expect: DP310
SELECT COUNT(*, contribution_bounds_per_row => (0, 1)) FROM visits
