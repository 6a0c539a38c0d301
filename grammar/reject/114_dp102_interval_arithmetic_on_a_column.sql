-- expect: DP102
-- caret: INTERVAL '90' DAY
SELECT COUNT(*) FROM people WHERE joined + INTERVAL '90' DAY <= DATE '2021-12-01'
