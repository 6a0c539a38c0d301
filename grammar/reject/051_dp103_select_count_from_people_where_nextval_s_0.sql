-- expect: DP103
SELECT COUNT(*) FROM people WHERE nextval('s') > 0
