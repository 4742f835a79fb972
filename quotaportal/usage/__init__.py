"""Usage accounting: who used how many instance-hours of their own share, borrowed, lent, lost
to preemption and left idle while others waited. `rollup` keeps hourly rows
(UsageHour, UsageWait) from the attempts' own times (scheduler.accounting does the sums);
`reports` answers a period from those rows plus what is not rolled up yet, counted live."""
