-- expect: DP103
SELECT COUNT(*) FROM people WHERE random() > 0.5
