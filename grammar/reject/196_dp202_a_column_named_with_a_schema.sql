-- expect: DP202
-- caret: clinics. clinics.clinic
-- A column named with more than its table: DuckDB reads clinics.clinics.clinic as a field of a column
-- clinics, and refuses it; a join's condition was answered (the slow differential test found it)
SELECT COUNT(*) FROM visits v JOIN clinics ON v.clinic = clinics. clinics.clinic
