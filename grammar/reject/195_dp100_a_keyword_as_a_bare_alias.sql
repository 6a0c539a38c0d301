-- expect: DP100
-- caret: ALL
-- sqlglot reads ALL as the count's alias; DuckDB's parser refuses a keyword there without quotes (the slow
-- differential test found it answered). sql/keywords.py lists the keywords, per place.
SELECT COUNT(*) ALL FROM visits
