SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, max_groups_contributed = 1, privacy_unit_column = person_id)
    clinic, PERCENTILE_CONT(cost, 0.5, contribution_bounds_per_row => (0, 40)) AS median_cost
FROM visits GROUP BY clinic
