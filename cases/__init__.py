"""Cases: the unit of an investigator's work, from alert to filed SAR.

Alerts open or join cases; a case's state is the fold of its entries in the cases log (a Merkle
log with the audit log's proofs, :mod:`cases.store`); a SAR is proposed by one user and approved
by another (:mod:`cases.workflow`); an approved SAR is exported as FinCEN's SAR batch XML
(:mod:`cases.sar_xml`), validated against FinCEN's schema.
"""
