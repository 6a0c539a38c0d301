-- expect: DP313
SELECT COUNT(*) FROM people WHERE length(replace(replace(zip, '0', '0000000000'), '0', '0000000000')) > 5
