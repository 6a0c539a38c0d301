SELECT WITH DIFFERENTIAL_PRIVACY
    OPTIONS(epsilon = 1, delta = 1e-7, max_groups_contributed = 1, privacy_unit_column = person_id)
  clinic,
  AVG(cost, contribution_bounds_per_group => (0, 40)) AS average_cost,
  COUNT(*, contribution_bounds_per_group => (0, 5)) AS visits
FROM visits
GROUP BY clinic
