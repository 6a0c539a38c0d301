-- DuckDB's FROM-first form around a subquery correlated on a public key: its star is the query's own
-- tables' columns, never the released values' (the slow differential test found them answered)
FROM clinics WHERE doctors * 200 > (SELECT COUNT(*) FROM visits v WHERE v.clinic = clinics.clinic) ORDER BY clinic
