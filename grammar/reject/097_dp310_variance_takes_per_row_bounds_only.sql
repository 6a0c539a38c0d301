-- expect: DP310
SELECT VARIANCE(cost, contribution_bounds_per_group => (0, 5)) FROM visits
