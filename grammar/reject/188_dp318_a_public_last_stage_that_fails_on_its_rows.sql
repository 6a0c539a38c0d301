-- expect: DP318
-- a public last stage whose own SQL fails in the engine (doctors * '': no number) is tried on every key its
-- release may hold before the charge, and refused free (the slow differential test found it failing after)
SELECT clinic FROM clinics WHERE doctors * '' > (SELECT COUNT(*) FROM visits v WHERE v.clinic = clinics.clinic) ORDER BY clinic
