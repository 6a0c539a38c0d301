-- expect: DP317
-- caret: vv.clinic
-- a correlated subquery naming an alias it does not have (the slow differential test found a KeyError here)
SELECT clinic FROM clinics WHERE doctors * 200 > (SELECT COUNT(*) FROM visits v WHERE vv.clinic = clinics.clinic) ORDER BY clinic
