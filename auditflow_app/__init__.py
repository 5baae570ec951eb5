"""auditflow's application layer: what a user or an operator touches, on top of the stages.

The stages (``ingest`` -> ``pipelines`` -> ``evidence_graph`` -> ``model_service`` -> ``reports``)
take plain typed arguments and never read settings; this package reads them and wires the stages:

* :mod:`auditflow_app.settings`: every ``AUDITFLOW_*`` setting, typed and validated once;
* :mod:`auditflow_app.flow`: orchestration (train, stream, deep path, reports, schedules), each step
  returning a typed result;
* :mod:`auditflow_app.cli` and :mod:`auditflow_app.analyst_api`: render those results as terminal
  tables, JSON and HTTP, and nothing more.

The pure core, :mod:`auditflow`, imports no stage and nothing from here.
"""
