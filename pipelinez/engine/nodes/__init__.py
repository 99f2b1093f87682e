"""What each node kind does in one attempt: source loads (and a retry's reuse of a staged load), pipelines
(stored or streamed), checks, sink writes (the Arrow stream, sink-side checks, type fitting) and the in-run
watermark bookkeeping of a bounded load; landing data in staging (`landing`) and a partitioned load's
partitions, one implementation for every backend (`partitions`)."""
