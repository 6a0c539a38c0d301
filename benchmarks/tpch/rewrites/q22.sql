-- c_phone's country code written as TPC-H generates it, c_nationkey + 10 (equal on every SF 1 customer); c_phone is an identifier, its prefix no declared key
select
    cntrycode,
    count(*) as numcust,
    sum(c_acctbal) as totacctbal
from
    (
        select
            cast(c_nationkey + 10 as varchar) as cntrycode,
            c_acctbal
        from
            customer
        where
            cast(c_nationkey + 10 as varchar) in ('13', '31', '23', '29', '30', '18', '17')
            and c_acctbal > (
                select
                    avg(c_acctbal)
                from
                    customer
                where
                    c_acctbal > 0.00
                    and cast(c_nationkey + 10 as varchar) in ('13', '31', '23', '29', '30', '18', '17')
            )
            and not exists (
                select
                    *
                from
                    orders
                where
                    o_custkey = c_custkey
            )
    ) as custsale
group by
    cntrycode
order by
    cntrycode;
