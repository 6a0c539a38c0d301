-- expect: DP101
SELECT COUNT(*) FROM people; SELECT 1
