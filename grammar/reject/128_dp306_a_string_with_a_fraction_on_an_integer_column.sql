-- expect: DP306
-- caret: age = '4.5'
SELECT COUNT(*) FROM people WHERE age = '4.5'
