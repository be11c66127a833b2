"""Scrapy on frontierflow's frontier (the optional extra `frontierflow[scrapy]`).

`FrontierScheduler` (Scrapy's `SCHEDULER`) serves Scrapy the frontier topic the way the
reference fetcher does, with the fetcher's own queue and reader; `FetchEventMiddleware` (a
downloader middleware) publishes one FetchEvent per answered entry with the fetcher's own
event rules; ScalingDecisions for the crawler's fetcher id set the downloader's total
concurrency at run time. `settings` reads the `FRONTIERFLOW_*` settings, `link` holds the
state the scheduler and the middleware share, `responses` turns Scrapy's answers into the
fetcher's `PageOutcome`, `resolve` maps host names to fixed addresses.
See examples/scrapy/ and docs/guides/scrapy.md.
"""
