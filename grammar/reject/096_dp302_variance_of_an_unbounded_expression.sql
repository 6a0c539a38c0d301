-- expect: DP302
SELECT VAR_POP(age * income / (income - 1)) FROM people
