-- expect: DP202
-- caret: v.clinicclinic
-- a qualified column its joined table does not have (the slow differential test found a KeyError here)
SELECT v.clinicclinic, SUM(cost) AS total FROM visits v JOIN clinics c ON v.clinic = c.clinic GROUP BY v.clinic
