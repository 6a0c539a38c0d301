-- expect: DP318
-- the failing expression in the outputs, evaluated only on rows the released values keep: the try keeps
-- every row some release could keep (the condition on the value wrapped COALESCE(c, TRUE))
SELECT clinic, CAST(region AS INTEGER) FROM clinics WHERE doctors > (SELECT COUNT(*) FROM visits v WHERE v.clinic = clinics.clinic)
