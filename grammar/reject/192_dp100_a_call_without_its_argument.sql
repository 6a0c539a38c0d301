-- expect: DP100
-- caret: DATE
-- sqlglot parses DATE() but cannot write it again (the slow fuzz test found a ParseError deep in planning)
SELECT DATE() FROM people WHERE age >= 18 AND income < 500
