-- cwida/privacy benchmark/dp/tpch_queries/q14.sql; bounds: dp_sum_bounds 1,000,000 and 1,000,000
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon = 1, delta = 1e-6)
    100.00 * sum(CASE
        WHEN p_type LIKE 'PROMO%'
        THEN l_extendedprice * (1 - l_discount)
        ELSE 0
    END, contribution_bounds_per_group => (0, 1000000))
    / sum(l_extendedprice * (1 - l_discount), contribution_bounds_per_group => (0, 1000000)) AS promo_revenue
FROM lineitem, part
WHERE l_partkey = p_partkey
  AND l_shipdate >= CAST('1995-09-01' AS date)
  AND l_shipdate < CAST('1995-10-01' AS date);
