-- expect: DP100
-- caret: ,
-- sqlglot skips an empty item (SELECT , region); DuckDB's parser refuses it, and so does dpsql (the slow
-- differential test found it answered)
SELECT , region FROM clinics
