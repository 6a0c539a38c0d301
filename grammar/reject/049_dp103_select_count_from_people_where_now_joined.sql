-- expect: DP103
SELECT COUNT(*) FROM people WHERE now() > joined
