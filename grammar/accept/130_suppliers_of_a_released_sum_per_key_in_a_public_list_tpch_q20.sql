SELECT clinic, region FROM clinics
WHERE clinic IN (SELECT k.clinic FROM clinics k WHERE k.region IN (SELECT region FROM clinics WHERE doctors > 2)
                 AND k.doctors * 12 > (SELECT AVG(cost) FROM visits WHERE visits.clinic = k.clinic))
ORDER BY clinic
