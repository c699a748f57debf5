"""Sinks: one folder per sink, each behind the small `Sink` contract in base.py.

A sink never imports another sink; `registry.make_sink` picks one by its config `type`.
"""
