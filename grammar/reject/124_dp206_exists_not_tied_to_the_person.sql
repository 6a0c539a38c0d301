-- expect: DP206
-- caret: EXISTS (SELECT * FROM prescriptions WHERE dose > 5)
SELECT COUNT(*) FROM visits WHERE EXISTS (SELECT * FROM prescriptions WHERE dose > 5)
