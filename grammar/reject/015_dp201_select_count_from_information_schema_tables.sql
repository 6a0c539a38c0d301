-- expect: DP201
SELECT COUNT(*) FROM information_schema.tables
