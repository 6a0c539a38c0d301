-- expect: DP310
SELECT SUM(cost, contribution_bounds_per_seat => (0, 1)) FROM visits
