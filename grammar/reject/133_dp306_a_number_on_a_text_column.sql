-- expect: DP306
SELECT COUNT(*) FROM people WHERE zip = 42
