"""A local emulator of the DGX Cloud Lepton job API (same paths, JSON, states, auth).

Replicas run as real local processes with the variables Lepton injects, each in its own
mount and UTS namespace whose /etc/hosts maps the job's worker names to a per-job
loopback address, so multi-node rendezvous really happens. Faults are switched on per
route or per job through `/_emulator/faults`, a route the real API does not have and
no client of the real API calls.
"""
