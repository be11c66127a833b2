"""The URL Frontier API (crawler-commons, v2.x) as frontierflow speaks it: the `.proto`, its
generated stubs (`infra/urlfrontier/gen.sh`) and the pure conversions between its messages
and frontierflow's records (`convert`). The gRPC server that drives the engine is
`frontierflow.pipelines.urlfrontier`: it runs an engine, which a connector may not import."""
