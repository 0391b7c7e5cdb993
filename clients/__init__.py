"""Lean asyncio Kafka protocol clients, for tests and the load generator."""
