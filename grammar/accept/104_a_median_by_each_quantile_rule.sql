SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 3, delta = 1e-6)
    clinic, MEDIAN(cost, mechanism => 'exponential') AS em, QUANTILE_CONT(cost, 0.9, mechanism => 'smooth') AS smooth,
    MEDIAN(cost) AS tree, MIN(cost, mechanism => 'tree') AS low
FROM visits GROUP BY clinic
