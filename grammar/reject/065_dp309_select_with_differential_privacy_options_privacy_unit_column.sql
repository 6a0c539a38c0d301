-- expect: DP309
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(privacy_unit_column = clinic) COUNT(*) FROM visits
