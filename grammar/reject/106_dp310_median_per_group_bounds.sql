-- expect: DP310
SELECT MEDIAN(cost, contribution_bounds_per_group => (0, 10)) FROM visits
