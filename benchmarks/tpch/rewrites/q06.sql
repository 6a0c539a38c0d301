-- date arithmetic folded by hand: DATE '1994-01-01' + INTERVAL '1' YEAR is DATE '1995-01-01'
select
    sum(l_extendedprice * l_discount) as revenue
from
    lineitem
where
    l_shipdate >= date '1994-01-01'
    and l_shipdate < date '1995-01-01'
    and l_discount between 0.06 - 0.01 and 0.06 + 0.01
    and l_quantity < 24;
