-- expect: DP306
SELECT COUNT(*) FROM people WHERE age = '42'
