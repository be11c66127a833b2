"""Where the frontier's state is kept, apart from what is kept (the per-URL, per-host and
per-fetcher models in `state/`): the store interface and its transactions (`store`), the
RocksDB store (`rocksdb`) and the in-memory one (`memory`), the hot-state cache (`cache`),
the column families and keys (`format`), and the binary layout helpers every model's
encoding uses (`codec`)."""
