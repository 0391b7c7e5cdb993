"""JSON message schemas kafka-python does not ship, in the same form as Kafka's own."""
