"""A local emulator of the DGX Cloud Lepton job API (same paths, JSON, states, auth).

A service for tests and the devstack (`anylaunch lepton-emulator`), never part of a
launch. It writes the real API's JSON by hand rather than through the client's wire
models (`anylaunch.backends.lepton.rest.wire`), so a mistake in those models shows up
as a failed test instead of being mirrored; it shares only the API's rules (`rules.py`),
so it refuses exactly what the client refuses.

Replicas run as real local processes with the variables Lepton injects, each in its own
mount and UTS namespace whose /etc/hosts maps the job's worker names to a per-job
loopback address, so multi-node rendezvous really happens. Faults are switched on per
route or per job through `/_emulator/faults`, a route the real API does not have and
no client of the real API calls.
"""
