-- expect: DP201
-- caret: secrets
SELECT COUNT(*) FROM secrets
