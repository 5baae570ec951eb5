"""Stream jobs: parse and validate events, keep per-account windowed features, score every
event on the fast path and emit alerts, and write the transaction graph.

:mod:`pipelines.features` is the pure feature core shared by the PyFlink job and the
plain-Python reference loop.
"""
