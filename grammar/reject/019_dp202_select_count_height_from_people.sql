-- expect: DP202
-- caret: height
SELECT COUNT(height) FROM people
