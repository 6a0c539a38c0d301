-- expect: DP317
SELECT COUNT(*) FROM clinics WHERE doctors > (SELECT AVG(cost) FROM visits)
