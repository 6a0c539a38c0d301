-- expect: DP304
-- caret: zip
SELECT zip, COUNT(*) FROM people GROUP BY zip
