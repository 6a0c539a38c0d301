-- expect: DP310
SELECT SUM(cost, contribution_bounds_per_group => (5, 1)) FROM visits
