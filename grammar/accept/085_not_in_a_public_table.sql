SELECT COUNT(*) FROM visits WHERE clinic NOT IN (SELECT clinic FROM clinics WHERE region = 'south')
