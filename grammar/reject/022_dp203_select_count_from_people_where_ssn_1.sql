-- expect: DP203
-- caret: SSN
SELECT COUNT(*) FROM people WHERE SSN <> '1'
