-- expect: DP103
SELECT COUNT(*) FROM people WHERE repeat(zip, 1000000) = ''
