"""Where `__consumer_offsets` records go: the store interface and its implementations."""
