"""The sans-IO group coordinator.

Rules it keeps:
- Nothing here awaits or reads a clock: every call is given `now` (ms) and returns a
  `Result` holding its value, the replies it completes (JoinGroup and SyncGroup replies may be
  parked and completed by a later call or timer) and the `__consumer_offsets` records the
  change must persist before any of those replies is sent.
- Group state changes only through `Group.transition`, checked against a table of legal
  previous states.
- Time-driven work (session expiry, the join and sync phase deadlines) runs from keyed timers
  that the shell fires through `GroupCoordinator.advance(now)`.
"""
