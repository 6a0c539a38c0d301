-- expect: DP317
-- caret: AVG(cost) FROM visits
SELECT clinic FROM clinics WHERE clinic IN (SELECT k.clinic FROM clinics k WHERE k.doctors > (SELECT AVG(cost) FROM visits)) ORDER BY clinic
