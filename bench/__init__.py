"""Benchmarks of anylaunch against bare Python and the tools users would pick instead."""
