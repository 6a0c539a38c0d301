-- expect: DP316
SELECT COUNT(*) FROM clinics WHERE doctors > (SELECT AVG(cost) FROM visits)
