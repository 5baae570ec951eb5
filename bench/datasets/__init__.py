"""Third-party AML data in the AMLworld format, for the development loop (see README.md here).

``build.py`` makes the sets; :mod:`bench.datasets.amlsim` and :mod:`bench.datasets.synthfin` hold
each source's pure converters (their output files -> AMLworld rows and answer-key blocks) and
the code that runs the source; :mod:`bench.datasets.common` what both share.
"""
