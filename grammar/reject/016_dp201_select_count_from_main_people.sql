-- expect: DP201
SELECT COUNT(*) FROM main.people
