-- expect: DP103
SELECT COUNT(*) FROM people WHERE uuid() IS NULL
