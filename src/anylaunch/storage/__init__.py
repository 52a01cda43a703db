"""Data staging: S3 inputs and outputs through a validated shared-filesystem cache.

`uri` parses and checks URIs (at load time, so a bad scheme is a config error),
`s3` builds clients from the seed's variables, `cache` keeps validated copies,
`stagein`/`stageout` run inside the job (`python -m anylaunch.storage in|out MANIFEST`).
"""
