-- expect: DP102
-- caret: INTERVAL '1 year 2 months'
SELECT COUNT(*) FROM people WHERE joined < DATE '2020-01-01' + INTERVAL '1 year 2 months'
