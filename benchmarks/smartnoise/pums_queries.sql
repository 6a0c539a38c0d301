-- SmartNoise SQL's own test queries over the PUMS table, collected from opendp/smartnoise-sdk
-- (sql/tests, commit 81d1351b; MIT licence), one per block: its origin, `-- smartnoise: refused` where
-- SmartNoise's tests expect a refusal (its *_fail.sql files, pytest.raises), then the query as written.
-- Run them with benchmarks/smartnoise/run_pums.py.

-- 001 ast/test_count_compare.py
SELECT COUNT(*) AS c, COUNT(sex) AS s, COUNT(age) AS a FROM PUMS.PUMS;

-- 002 ast/test_count_compare.py
SELECT COUNT(sex) AS s, COUNT(age) AS a, COUNT(*) AS c FROM PUMS.PUMS;

-- 003 ast/test_visualize.py
SELECT SUM(age) AS my_sum FROM pums.pums GROUP BY age;

-- 004 ast/test_visualize.py
SELECT SUM(age) AS my_sum FROM PUMS.PUMS GROUP BY age;

-- 005 ast/test_visualize.py
SELECT AVG(age) AS my_sum FROM PUMS.PUMS GROUP BY age;

-- 006 engines/test_pandas_dict.py
SELECT COUNT(*) FROM pums;

-- 007 engines/test_pandas_dict.py
SELECT COUNT(*) FROM PUMS.PUMS;

-- 008 engines/test_pandas_dict.py
SELECT COUNT(*) FROM PUMS.PUMS_null;

-- 009 metadata/test_load_from.py
SELECT COUNT(age) FROM PUMS.PUMS GROUP BY sex;

-- 010 odometer/test_odometer.py
SELECT VAR(age), VAR(income) FROM PUMS.PUMS GROUP BY sex;

-- 011 odometer/test_odometer.py
SELECT COUNT(DISTINCT pid) FROM PUMS.PUMS GROUP BY educ;

-- 012 odometer/test_odometer.py
SELECT COUNT(age) FROM PUMS.PUMS GROUP BY educ;

-- 013 odometer/test_odometer.py
SELECT COUNT(*) FROM PUMS.PUMS GROUP BY educ;

-- 014 odometer/test_odometer.py
SELECT COUNT(DISTINCT age) FROM PUMS.PUMS GROUP BY educ;

-- 015 odometer/test_odometer.py
SELECT VAR(age) FROM PUMS.PUMS GROUP BY educ;

-- 016 odometer/test_odometer.py
SELECT STD(age) FROM PUMS.PUMS GROUP BY sex;

-- 017 odometer/test_odometer.py
SELECT AVG(age) FROM PUMS.PUMS GROUP BY educ;

-- 018 odometer/test_odometer.py
SELECT SUM(age) FROM PUMS.PUMS GROUP BY educ;

-- 019 private_reader/test_pre_aggregated.py
SELECT sex, COUNT(*) AS n, COUNT(*) AS foo FROM PUMS.PUMS GROUP BY sex ORDER BY sex;

-- 020 query/queries/parse/stringfuncs.sql
SELECT CONCAT(age, educ) FROM PUMS;

-- 021 query/queries/parse/stringfuncs.sql
SELECT CAST(age AS CHAR(20)) FROM PUMS;

-- 022 query/queries/parse/stringfuncs.sql
SELECT CAST(educ AS INTEGER) FROM PUMS;

-- 023 query/queries/parse/stringfuncs.sql
SELECT CONCAT(CAST(age AS VARCHAR), CAST(educ AS VARCHAR)) FROM PUMS;

-- 024 query/queries/validate_pums/validate_pums.sql
SELECT SUM(age) FROM PUMS.PUMS;

-- 025 query/queries/validate_pums/validate_pums.sql
SELECT COUNT(*), VAR(age) AS var_age FROM PUMS.PUMS;

-- 026 query/queries/validate_pums/validate_pums.sql
SELECT married, educ, income, AVG(age) FROM PUMS.PUMS GROUP BY married, educ, income;

-- 027 query/queries/validate_pums/validate_pums.sql
SELECT p.married, AVG(age) AS aa FROM PUMS.PUMS AS p GROUP BY married;

-- 028 query/queries/validate_pums/validate_pums.sql
SELECT TOP 5 educ, AVG(income) FROM PUMS.PUMS GROUP BY educ;

-- 029 query/queries/validate_pums/validate_pums.sql
SELECT COUNT(married), AVG(age) FROM PUMS.PUMS;

-- 030 query/queries/validate_pums/validate_pums.sql
SELECT 3 AS three, p.married, educ, AVG(income) FROM PUMS.PUMS AS p GROUP BY educ, married;

-- 031 query/queries/validate_pums/validate_pums.sql
SELECT educ FROM PUMS.PUMS GROUP BY educ;

-- 032 query/queries/validate_pums/validate_pums.sql
SELECT SUM(age) AS age FROM PUMS.PUMS;

-- 033 query/queries/validate_pums/validate_pums.sql
SELECT (SUM(age)) AS age FROM PUMS.PUMS;

-- 034 query/queries/validate_pums/validate_pums.sql
SELECT SUM(age) * 1 AS age FROM PUMS.PUMS;

-- 035 query/queries/validate_pums/validate_pums.sql
SELECT SUM(age), COUNT(*) FROM PUMS.PUMS;

-- 036 query/queries/validate_pums/validate_pums.sql
SELECT PI(), RAND(), POWER(AVG(age), 2) FROM PUMS.PUMS;

-- 037 query/queries/validate_pums/validate_pums.sql
SELECT SUM(age) FROM PUMS.PUMS GROUP BY married, CASE WHEN age > 90 THEN 1 ELSE 0 END;

-- 038 query/queries/validate_pums/validate_pums_fail.sql
-- smartnoise: refused
SELECT SUM(Age + Income) FROM PUMS.PUMS;

-- 039 query/queries/validate_pums/validate_pums_fail.sql
-- smartnoise: refused
SELECT SUM(SUM(age)) FROM PUMS.PUMS;

-- 040 query/queries/validate_pums/validate_pums_fail.sql
-- smartnoise: refused
SELECT TOP 5 educ, AVG(income) FROM PUMS.PUMS GROUP BY income ORDER BY income DESC;

-- 041 query/queries/validate_pums/validate_pums_fail.sql
-- smartnoise: refused
SELECT COUNT(*) FROM (SELECT * FROM PUMS.PUMS);

-- 042 query/queries/validate_pums/validate_pums_fail.sql
-- smartnoise: refused
SELECT a.pid, b.income FROM PUMS.PUMS AS a JOIN PUMS.PUMS AS b ON b.pid = a.pid;

-- 043 query/queries/validate_pums/validate_pums_fail.sql
-- smartnoise: refused
SELECT married, educ, income, AVG(age) FROM PUMS.PUMS;

-- 044 query/queries/validate_pums/validate_pums_fail.sql
-- smartnoise: refused
SELECT 3 AS three, p.married, educ, AVG(income) FROM PUMS.PUMS AS p GROUP BY educ;

-- 045 query/queries/validate_pums/validate_pums_fail.sql
-- smartnoise: refused
SELECT CASE WHEN age > 90 THEN 1 ELSE 0 END AS age FROM PUMS.PUMS;

-- 046 query/queries/validate_pums/validate_pums_fail.sql
-- smartnoise: refused
SELECT SUM(CASE WHEN age > 90 THEN 1 ELSE 0 END) AS age FROM PUMS.PUMS;

-- 047 query/queries/validate_pums/validate_pums_fail.sql
-- smartnoise: refused
SELECT SUM(age + 1) * 1 AS age FROM PUMS.PUMS;

-- 048 query/test_fq_object_name.py
SELECT COUNT(*) FROM PUMS.PUMS.PUMS;

-- 049 query/test_grouping_clamp.py
SELECT AVG(income) AS income FROM PUMS.PUMS;

-- 050 query/test_grouping_clamp.py
SELECT income, COUNT(pid) AS n FROM PUMS.PUMS GROUP BY income;

-- 051 query/test_having.py
SELECT age, sex, COUNT(*) AS n, SUM(income) AS income FROM PUMS.PUMS GROUP BY age, sex HAVING income > 100000;

-- 052 query/test_having.py
SELECT age, sex, COUNT(*) AS n, SUM(income) AS income FROM PUMS.PUMS GROUP BY age, sex HAVING sex = 1;

-- 053 query/test_having.py
SELECT age, sex, COUNT(*) AS n, SUM(income) AS income FROM PUMS.PUMS GROUP BY age, sex HAVING income > 100000 OR sex = 1;

-- 054 query/test_having.py
SELECT age, COUNT(*) FROM PUMS.PUMS GROUP BY age HAVING age < 30 OR age > 60;

-- 055 query/test_having.py
SELECT age * 1000 as age, COUNT(*) FROM PUMS.PUMS GROUP BY age HAVING age < 30000 OR age > 60000;

-- 056 query/test_having.py
SELECT age as age, COUNT(*) FROM PUMS.PUMS GROUP BY age HAVING age * 1000 < 30000 OR age * 2 > 120;

-- 057 query/test_having.py
SELECT age, COUNT(*) AS n FROM PUMS.PUMS GROUP BY age HAVING (age < 30 OR age > 60) AND n > 10;

-- 058 query/test_having.py
SELECT age, COUNT(*) * 1000 AS n FROM PUMS.PUMS GROUP BY age HAVING (age < 30 OR age > 60) AND n > 10000;

-- 059 query/test_having.py
SELECT age, COUNT(*) AS n FROM PUMS.PUMS GROUP BY age HAVING (age < 30 OR age > 60) AND n * 100 / 2 > 500;

-- 060 query/test_having.py
SELECT age, married, COUNT(*) AS n, SUM(income) AS income FROM PUMS.PUMS GROUP BY age, married HAVING married = 1;

-- 061 query/test_having.py
SELECT age, married, COUNT(*) AS n, SUM(income) AS income FROM PUMS.PUMS GROUP BY age, married HAVING n > 10 OR married = 1;

-- 062 query/test_having.py
SELECT age, married, COUNT(*) AS n, SUM(income) AS income FROM PUMS.PUMS GROUP BY age, married HAVING married;

-- 063 query/test_having.py
SELECT age, married, COUNT(*) AS n, SUM(income) AS income FROM PUMS.PUMS GROUP BY age, married HAVING n > 10 OR married;

-- 064 query/test_having.py
SELECT age, married, COUNT(*) AS n, SUM(income) AS income FROM PUMS.PUMS GROUP BY age, married HAVING married = 0;

-- 065 query/test_having.py
SELECT age, married, COUNT(*) AS n, SUM(income) AS income FROM PUMS.PUMS GROUP BY age, married HAVING n > 10 OR married = 0;

-- 066 query/test_having.py
SELECT age, married, COUNT(*) AS n, SUM(income) AS income FROM PUMS.PUMS GROUP BY age, married HAVING NOT married;

-- 067 query/test_having.py
SELECT age, married, COUNT(*) AS n, SUM(income) AS income FROM PUMS.PUMS GROUP BY age, married HAVING n > 10 OR NOT married;

-- 068 query/test_having_expressions.py
SELECT educ, COUNT(*) FROM pums GROUP BY educ HAVING COUNT(*) > 50;

-- 069 query/test_having_expressions.py
SELECT educ, COUNT(DISTINCT pid) AS n FROM pums GROUP BY educ HAVING COUNT(DISTINCT pid) > 50;

-- 070 query/test_having_expressions.py
SELECT educ, COUNT(DISTINCT pid) AS n FROM pums GROUP BY educ HAVING n > 50;

-- 071 query/test_having_expressions.py
-- smartnoise: refused
SELECT educ, COUNT(DISTINCT pid) AS n FROM pums GROUP BY educ HAVING COUNT(*) > 50;

-- 072 query/test_having_expressions.py
SELECT educ, COUNT(*) FROM pums GROUP BY educ HAVING (COUNT(*) / CAST(educ AS INTEGER)) > 5;

-- 073 query/test_having_expressions.py
SELECT sex as educ, educ as sex, COUNT(*) AS n FROM pums GROUP BY sex, educ HAVING sex > 2;

-- 074 query/test_having_expressions.py
SELECT educ as sex, sex as educ, COUNT(*) AS n FROM pums GROUP BY sex, educ HAVING sex > 2;

-- 075 query/test_having_expressions.py
SELECT sex as educ, educ as sex, COUNT(*) AS n FROM pums GROUP BY sex, educ HAVING educ > 2;

-- 076 query/test_having_expressions.py
SELECT educ as sex, sex as educ, COUNT(*) AS n FROM pums GROUP BY sex, educ HAVING educ > 2;

-- 077 query/test_i32_overflow.py
SELECT AVG(income) FROM PUMS.PUMS;

-- 078 query/test_opt_rewrite.py
SELECT COUNT (*) AS foo, COUNT(DISTINCT pid) AS bar FROM PUMS.PUMS;

-- 079 query/test_opt_rewrite.py
SELECT COUNT (DISTINCT pid) AS foo, COUNT(DISTINCT "PiD") AS bar FROM PUMS.PUMS;

-- 080 query/test_opt_rewrite.py
SELECT AVG(age), SUM(age), COUNT(age) FROM PUMS.PUMS;

-- 081 query/test_order_by_expressions.py
SELECT sex AS gender, educ FROM pums GROUP BY sex, educ ORDER by sex DESC;

-- 082 query/test_order_by_expressions.py
SELECT sex AS gender, educ AS sex FROM pums GROUP BY sex, educ ORDER by gender DESC;

-- 083 query/test_order_by_expressions.py
SELECT sex AS gender, educ AS sex FROM pums GROUP BY sex, educ ORDER by (CAST(gender AS INTEGER) + 5) DESC;

-- 084 query/test_order_by_expressions.py
SELECT sex AS gender, educ AS sex FROM pums GROUP BY sex, educ ORDER by sex DESC;

-- 085 query/test_order_by_expressions.py
-- smartnoise: refused
SELECT educ FROM pums GROUP BY educ ORDER by sex DESC;

-- 086 query/test_order_by_expressions.py
SELECT sex AS gender, educ AS sex FROM pums GROUP BY sex, educ ORDER by (CAST(gender AS INTEGER) * -1) DESC;

-- 087 query/test_order_by_expressions.py
SELECT sex AS gender, educ AS sex FROM pums GROUP BY sex, educ ORDER by (CAST(gender AS INTEGER) * -1) DESC, educ ASC;

-- 088 query/test_order_by_expressions.py
SELECT educ FROM pums GROUP BY educ ORDER by CAST(educ AS INTEGER) DESC;

-- 089 query/test_order_by_expressions.py
SELECT educ FROM pums GROUP BY educ ORDER by CAST(educ AS VARCHAR) DESC;

-- 090 query/test_order_by_expressions.py
-- smartnoise: refused
SELECT educ, COUNT(DISTINCT pid) AS n FROM pums GROUP BY educ ORDER by COUNT(pid) DESC;

-- 091 query/test_query.py
SELECT COUNT(*) AS c FROM PUMS.PUMS;

-- 092 query/test_query.py
SELECT age as a FROM PUMS.PUMS WHERE age > 100;

-- 093 query/test_query.py
SELECT COUNT(*) AS c, married AS m FROM PUMS.PUMS GROUP BY married ORDER BY c;

-- 094 query/test_query.py
SELECT COUNT(*) AS c, married AS m FROM PUMS.PUMS GROUP BY married ORDER BY c DESC;

-- 095 query/test_query.py
SELECT COUNT(*) * 5 AS c, married AS m FROM PUMS.PUMS GROUP BY married ORDER BY c DESC;

-- 096 query/test_query.py
SELECT COUNT(*) as c FROM PUMS.PUMS WHERE age > 100;

-- 097 query/test_query.py
SELECT SUM(age) as c FROM PUMS.PUMS WHERE age > 100;

-- 098 query/test_query.py
SELECT SUM(age) as age_total FROM PUMS.PUMS;

-- 099 query/test_query.py
SELECT POWER(SUM(age), 2) as age_total FROM PUMS.PUMS;

-- 100 query/test_query_error.py
SELECT SUM(income) FROM PUMS.PUMS;

-- 101 query/test_query_error.py
SELECT income, SUM(income) FROM PUMS.PUMS GROUP BY income;

-- 102 query/test_query_error.py
SELECT income FROM PUMS.PUMS GROUP BY income;

-- 103 query/test_query_error.py
SELECT COUNT(income) FROM PUMS.PUMS;

-- 104 query/test_thresholds.py
SELECT COUNT(*) AS c FROM PUMS.PUMS WHERE age > 70 GROUP BY educ;

-- 105 query/test_thresholds.py
SELECT COUNT(*) AS c FROM PUMS.PUMS WHERE age > 70 AND educ < 2;

-- 106 query/test_thresholds.py
SELECT COUNT(*) AS c FROM PUMS.PUMS GROUP BY married;

-- 107 query/test_thresholds.py
SELECT COUNT(*) FROM PUMS.PUMS GROUP BY married;

-- 108 query/test_top.py
SELECT TOP 5 educ, COUNT(*) AS n FROM PUMS.PUMS GROUP BY educ ORDER BY n DESC;

-- 109 query/test_top.py
SELECT educ, COUNT(*) AS n FROM PUMS.PUMS GROUP BY educ LIMIT 4;

-- 110 query/test_top.py
SELECT TOP 20 age, married, COUNT(*) AS n, SUM(income) AS income FROM PUMS.PUMS GROUP BY age, married ORDER BY married, age DESC;

-- 111 query/test_top.py
SELECT age, married, COUNT(*) AS n, SUM(income) AS income FROM PUMS.PUMS GROUP BY age, married ORDER BY married, age DESC LIMIT 10;

-- 112 query/test_top.py
SELECT age, married, COUNT(*) AS n, SUM(income) AS income FROM PUMS.PUMS GROUP BY age, married ORDER BY income DESC LIMIT 50;

-- 113 rewriter/test_rewriting.py
SELECT COUNT(*) AS c FROM PUMS.PUMS WHERE age > 90 AND educ = '8';

-- 114 rewriter/test_rewriting.py
SELECT COUNT(*) AS c FROM PUMS.PUMS WHERE age > 80 GROUP BY educ;

-- 115 rewriter/test_rewriting.py
SELECT (SUM(age)) as age_total FROM PUMS.PUMS;

-- 116 rewriter/test_rewriting.py
SELECT ((SUM(age))) as age_total FROM PUMS.PUMS;

-- 117 rewriter/test_rewriting.py
SELECT AVG(age) as age_total FROM PUMS.PUMS;

-- 118 rewriter/test_rewriting.py
SELECT VARIANCE(age) as age_total FROM PUMS.PUMS;

-- 119 rewriter/test_rewriting.py
SELECT STDDEV(age) as age_total FROM PUMS.PUMS;

-- 120 rewriter/test_rewriting.py
SELECT COUNT(*) AS count_all FROM PUMS.PUMS;

-- 121 rewriter/test_rewriting.py
SELECT AVG(age) FROM PUMS.PUMS;

-- 122 rewriter/test_rewriting.py
SELECT age, SUM(income) AS sum_income FROM PUMS.PUMS GROUP BY age HAVING age > 5 AND COUNT(*) > 7 OR NOT ( age < 5);

-- 123 rewriter/test_rewriting.py
SELECT age, sex, SUM(income) AS sum_income FROM PUMS.PUMS GROUP BY age, sex ORDER BY age, sum_income, sex DESC LIMIT 10;

-- 124 rewriter/test_rewriting.py
SELECT COUNT(*) AS count_all, SUM(income) AS sum_income, AVG(income) AS avg_income, VARIANCE(income) AS var_income, STDDEV(income) AS stddev_income FROM PUMS.PUMS;

-- 125 rewriter/test_rewriting.py
SELECT (VAR(age)) AS my_var, married FROM PUMS.PUMS GROUP BY married;

-- 126 rewriter/test_rewriting.py
SELECT age, sex, SUM(income) AS my_sum, SUM(age) AS sum_age FROM PUMS.PUMS GROUP BY age, sex HAVING NOT ( sex = True ) ORDER BY my_sum, sex DESC LIMIT 10;

-- 127 rewriter/test_rewriting.py
SELECT married, SUM(income) AS my_sum, SUM(age) AS sum_age FROM PUMS.PUMS GROUP BY married HAVING married;

-- 128 rewriter/test_rewriting.py
SELECT 3 AS three, married, educ, AVG(income) FROM PUMS.PUMS GROUP BY educ, married;

-- 129 rewriter/test_rewriting.py
SELECT SUM(income) AS income FROM PUMS.PUMS WHERE sex = True;

-- 130 rewriter/test_rewriting.py
SELECT AVG(income) AS income FROM PUMS.PUMS GROUP BY married;

-- 131 rewriter/test_rewriting.py
SELECT educ, SUM(income) AS total_income, AVG(income) AS avg_income, AVG(age) FROM PUMS.PUMS WHERE married = TRUE GROUP BY educ;

-- 132 rewriter/test_rewriting.py
SELECT educ, SUM(income) AS income FROM PUMS.PUMS WHERE educ IN (2, 3) GROUP BY educ ORDER BY educ DESC;

-- 133 rewriter/test_rewriting.py
SELECT COUNT(DISTINCT pid) AS n, age, income FROM PUMS.PUMS WHERE age > 55 GROUP BY age, income;

-- 134 rewriter/test_rewriting.py
SELECT COUNT(DISTINCT pid) AS pid FROM PUMS.PUMS GROUP BY married;

-- 135 rewriter/test_rewriting.py
SELECT COUNT(DISTINCT pid) AS pid FROM PUMS.PUMS;

-- 136 xpath/test_xpath.py
SELECT AVG(age) + 3, STD(age), VAR(age), SUM(age) / 10, COUNT(age) + 2 FROM PUMS.PUMS;
