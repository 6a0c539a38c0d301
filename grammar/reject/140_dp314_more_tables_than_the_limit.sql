-- expect: DP314
-- caret: clinics q
-- 17 references to a public table: each multiplies the rows (WorkLimits.max_tables)
SELECT COUNT(*) AS n
FROM clinics a, clinics b, clinics c, clinics d, clinics e, clinics f, clinics g, clinics h, clinics i, clinics j, clinics k, clinics l, clinics m, clinics n, clinics o, clinics p, clinics q
