-- expect: DP313
-- caret: replace(zip, zip, 'x')
SELECT COUNT(*) FROM people WHERE replace(zip, zip, 'x') = 'x'
