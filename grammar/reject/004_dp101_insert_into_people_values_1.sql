-- expect: DP101
INSERT INTO people VALUES (1)
