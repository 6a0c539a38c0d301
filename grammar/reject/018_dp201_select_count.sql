-- expect: DP201
SELECT COUNT(*)
