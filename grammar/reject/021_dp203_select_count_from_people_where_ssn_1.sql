-- expect: DP203
-- caret: ssn
SELECT COUNT(*) FROM people WHERE ssn = '1'
