-- expect: DP101
COPY people TO 'out.csv'
