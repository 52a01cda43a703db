"""Data staging: S3 inputs and outputs through a validated shared-filesystem cache.

`uri` parses and checks URIs (at load time, so a bad scheme is a config error),
`manifest` says what a job's staging steps do, `credentials` gives the job its storage
settings and checks inputs before submit, `s3` builds the client. The steps themselves
run inside the job from the in-job runtime (`anylaunch.node.runtime`), which needs only
python3's standard library in the image.
"""
