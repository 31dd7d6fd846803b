"""`loadtest.bench store-work`: what a job costs the store, counted (commands, documents, index entries)."""
