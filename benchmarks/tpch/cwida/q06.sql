-- cwida/privacy benchmark/dp/tpch_queries/q06.sql; bounds: dp_sum_bound 100,000
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 1e-6)
    sum(l_extendedprice * l_discount, contribution_bounds_per_group => (0, 100000)) AS revenue
FROM lineitem
WHERE l_shipdate >= CAST('1994-01-01' AS date)
  AND l_shipdate < CAST('1995-01-01' AS date)
  AND l_discount BETWEEN 0.05 AND 0.07
  AND l_quantity < 24;
