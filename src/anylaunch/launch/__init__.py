"""Launching: routing and limits resolved once, preflight checks, and the one
pipeline (render, record, send) that single jobs, splits and retries all take."""
