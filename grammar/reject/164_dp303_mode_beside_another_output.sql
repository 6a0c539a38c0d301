-- expect: DP303
-- caret: MODE(state)
SELECT MODE(state), COUNT(*) FROM people
