"""A local emulator of the DGX Cloud Lepton job API (same paths, JSON, states, auth).

A distribution of its own (`anylaunch-lepton-emulator`, the `lepton-emulator` command),
for tests, rehearsals and the devstack; anylaunch itself neither ships nor imports it, and
it imports nothing of anylaunch. It writes the real API's JSON by hand and keeps its own
copy of the API's rules (`rules.py`, from the official SDK's source), so a mistake in the
client's wire models or rules shows up as a failed test instead of being mirrored.

Replicas run as real local processes with the variables Lepton injects, each in its own
mount and UTS namespace whose /etc/hosts maps the job's worker names to a per-job
loopback address, so multi-node rendezvous really happens. Faults are switched on per
route or per job through `/_emulator/faults`, a route the real API does not have and
no client of the real API calls.
"""
