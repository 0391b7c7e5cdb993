"""The minicoord server: listener and connections, API handlers, the coordinator, config, CLI."""
