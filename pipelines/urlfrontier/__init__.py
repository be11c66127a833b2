"""The URL Frontier gRPC service: a crawler that speaks the crawler-commons URL Frontier API
(StormCrawler) gets its frontier from an embedded engine (`frontier`: puts become engine
steps; `records`: the service's records committed with each step and mirrored in memory;
`queues`: the schedule GetURLs serves from), or from a live job on Kafka (`kafka`). It
drives an engine, so it sits beside the evaluations above `pipelines.embedded`; the proto,
stubs and pure conversions are the connector `frontierflow.connectors.urlfrontier`."""
