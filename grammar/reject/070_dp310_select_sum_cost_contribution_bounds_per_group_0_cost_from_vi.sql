-- expect: DP310
SELECT SUM(cost, contribution_bounds_per_group => (0, cost)) FROM visits
