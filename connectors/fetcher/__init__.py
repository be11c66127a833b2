"""The reference fetcher: reads the compacted frontier topic, fetches pages over HTTP with
per-host politeness and robots.txt, and publishes one FetchEvent per answered entry.

`settings` (what it may do), `pages` (outlinks and terms, with the project's own HTML reader
and tokeniser), `queue` (one queue per host, best priority first, reply requests kept per
parent), `frontier` (the frontier topic read as one consumer group, and the ScalingDecisions),
`outcomes` and `events` (what a download came to, and the FetchEvent and records published
for it), `http` (the HTTP client and its address guard), `robots` (robots.txt rules and
crawl delays), `loop` (the asyncio fetch loop between Kafka topics), `metrics`. The Scrapy
adapter (`connectors/scrapy`) reuses `queue`, `frontier`, `outcomes` and `events`.
"""
