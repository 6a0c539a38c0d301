SELECT clinic FROM clinics WHERE doctors * 200 > (SELECT COUNT(*) FROM visits v WHERE v.clinic = clinics.clinic) ORDER BY clinic
