"""The DGX Cloud Lepton REST API as anylaunch speaks it: the client, the wire models,
the API's errors and the rules it enforces on a job body.

The emulator (`lepton_emulator`, a distribution of its own under `emulator/`) writes the
API's JSON by hand and keeps its own copy of the rules, so a mistake here fails a
loopback test instead of being mirrored on the other side.
"""
