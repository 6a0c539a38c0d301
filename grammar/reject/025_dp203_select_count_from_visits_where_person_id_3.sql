-- expect: DP203
-- caret: person_id
SELECT COUNT(*) FROM visits WHERE person_id = 3
