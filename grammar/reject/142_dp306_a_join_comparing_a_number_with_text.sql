-- expect: DP306
-- caret: v.cost = c.region
SELECT COUNT(*) FROM visits v JOIN clinics c ON v.cost = c.region
