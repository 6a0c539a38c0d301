-- expect: DP306
-- caret: zip
SELECT COUNT(*) FROM people WHERE zip
