"""FinCEN SAR batch XML (form type ``SARX``, schema ``EFL_SARXBatchSchema.xsd`` v1.2) from a case,
checked against FinCEN's schema and the batch rules the schema cannot express.

Pure: no settings, no clock, no database. The same filing and filer give the same bytes.

What FinCEN requires, and what this module writes
-------------------------------------------------
Sources: the schema (``cases/schemas/EFL_SARXBatchSchema.xsd``, copied unchanged from FinCEN, v1.2
of 12/17/2021), FinCEN's *SAR XML Schema User Guide* ("the guide") and FinCEN's filing instructions.

* **The batch.** ``EFilingBatchXML`` holds ``FormTypeCode`` ``SARX`` and the ``Activity`` elements
  (one per SAR; this module writes one). Its attributes summarise the content, and FinCEN rejects a
  batch whose summary disagrees: ``ActivityCount`` is the count of ``Activity`` elements;
  ``TotalAmount`` is the sum of all ``TotalSuspiciousAmountText`` amounts recorded in the batch (not
  cumulative or loss amounts); ``PartyCount`` is, for the SAR, the count of ``Party`` elements whose
  ``ActivityPartyTypeCode`` is ``33`` (Subject), not of all parties; ``ActivityAttachmentCount`` and
  ``AttachmentCount`` count the activities with an attachment and the attachments (0 here: this
  module attaches nothing). The guide's wording is quoted in the comments of moov-io/fincen's batch
  code (``pkg/batch/batch.go``, ``generateAttrs``; ``pkg/suspicious_activity/activity.go``,
  ``TotalAmount``), and a third-party SAR sample with two subjects carries ``PartyCount="2"``.
* **SeqNum.** Every element of a complex type carries ``SeqNum``, unique in the document (the
  schema's ``Unique-SeqNum`` constraint). This module numbers them 1, 2, ... in document order.
* **Parties.** Each SAR has one transmitter (35: name, address, phone, TIN as identification type 4
  and the Transmitter Control Code as type 28), one transmitter contact (37: name), one filing
  institution (30: primary federal regulator, legal name, address, TIN, optional RSSD number as type
  14, the filer's internal control/file number as type 29 — the case id — and the institution type),
  a contact office (8: name, phone), the institution where the activity occurred (34) and at least one
  subject (33). They are written in that order. ``validate_sar_xml`` checks that each is present and
  that 35, 37 and 30 occur once.
* **Where the activity occurred** defaults to the filing institution's own data
  (:attr:`Filer.activity_institution` overrides it). Without a branch address
  (:attr:`Filer.activity_branch`) it says ``NoBranchActivityInvolvedIndicator`` (the product's
  transfers are electronic); with one, a branch party (46) under ``PartyAssociation``.
* **Subjects.** The product knows a subject only by bank and account (the AMLworld data has no names).
  What is unknown is recorded with the schema's unknown indicators, never with placeholder text
  (FinCEN's *SAR Activity Review* 22, 2012: the e-filed SAR's "Unk." boxes supersede entering
  "UNKNOWN", "NONE" or "XX"): last/entity name and first name
  (``EntityLastNameUnknownIndicator``, ``FirstNameUnknownIndicator``), the whole address
  (``City``/``State``/``ZIPCode``/``StreetAddress``/``CountryCode`` ``UnknownIndicator``), TIN
  (``TINUnknownIndicator``), form of identification (``IdentificationPresentUnknownIndicator``),
  and for an individual date of birth and gender. :attr:`SarSubject.name` is the entity's legal name
  or the individual's last name. The account is recorded where the schema has room for it: in
  ``PartyAccountAssociation`` (type 7), a party 41 (the institution where the account is held) and its
  ``Account/AccountNumberText``. When the subject's bank is the filer's (:attr:`Filer.bank_id`) the
  party 41 carries the institution's TIN and the subject is marked a customer
  (``CustomerIndicator``, with the institution's TIN); for another bank the TIN is unknown
  (``TINUnknownIndicator``). The schema has no element for a bank's identifier in the product's data,
  so another bank's id is not written: name it in the narrative.
* **Amounts** are whole U.S. dollars, **rounded up** to the next whole dollar. The SAR guide
  describes ``TotalSuspiciousAmountText`` as "the total amount (in whole U.S. dollars) involved in
  the suspicious activity for the time period of the report"; the rounding is FinCEN's rule for its
  e-filed BSA reports, in its words "Record all U.S. Dollar amounts rounded up to the next whole
  dollar. The amount $15,265.25 would be recorded as $15,266." (general instruction 13, *Monetary
  amounts*, FinCEN CTR XML User Guide), and FinCEN's SAR preparation guidelines (2003, revised 2006)
  say "Round UP, to the nearest whole dollar". So 1,234,567.89 USD (123,456,789 cents) is recorded as
  1234568, and 0.01 USD as 1. An amount of 0 is written as ``NoAmountInvolvedIndicator``.
* **Dates** are ``YYYYMMDD`` (the schema's pattern; years 1900-2099). The end date is written only
  when it differs from the start date (the guide: "End date of suspicious activity (when different
  from the start date)").
* **Type of filing.** Without a prior report: ``InitialReportIndicator``. With one
  (``EFilingPriorDocumentNumber``, the 14-digit BSA ID, 14 zeros if unknown — the guide): a continuing
  activity report, or a correction when :attr:`SarFiling.corrects_prior`.
* **Categories** are ``SuspiciousActivityClassification`` items with FinCEN's type and subtype ids
  (:class:`auditflow.fincen.ActivityCategory`); a subtype may appear once (the schema's
  ``Unique-SuspiciousActivitySubtypeID``). "Other" subtypes (``x999``) carry the category's wording as
  ``OtherSuspiciousActivityTypeText``.
* **Narrative**: ``ActivityNarrativeInformation`` blocks numbered 1 to 5, each at most 4,000
  characters (the schema: ``maxOccurs="5"``, ``RestrictString4000``), so at most 20,000 characters;
  longer is refused, never cut. :func:`narrative_blocks` splits at a sentence end, else at a space,
  and only as a last resort inside a word; the blocks joined are exactly the narrative (the spaces
  between sentences stay at the end of a block). The schema's own annotation of block 5 says
  "16001-17000", an evident slip: its ``maxLength`` is 4,000 like the others.
* **Text** fields carry no leading or trailing spaces, line breaks or tabs (the schema's pattern
  ``\\S+( +\\S+)*`` since v1.1; the guide, section 3.2), and are refused, never truncated, when
  longer than the schema's ``maxLength``. The narrative has no such pattern and keeps its line breaks.

Checks
------
:func:`validate_sar_xml` runs FinCEN's schema (lxml; each error one line: the element, its path, the
offending value, lxml's reason) and then the rules the schema cannot express: the batch attributes
against the content, ``SeqNum`` unique (also a schema constraint, reported by both), the required
parties, amounts as digits (``TotalSuspiciousAmountText`` is a string to the schema), narrative blocks
numbered from 1 without gaps, dates that exist (the pattern lets 20240230 through), and no leading
space in the pattern-restricted text elements (libxml2 does not enforce the start of the pattern
``\\S+( +\\S+)*|``: it accepts " 703"). :func:`sar_batch_xml` runs these checks on every document
it makes before handing it out.

Errors: bad input is :class:`SarInputError` (a ``ValueError``) naming the field, its value and what
was expected; a document that fails the checks is :class:`SarInvalid` from :func:`check_sar_xml`.

>>> whole_dollars(123456789), whole_dollars(500), whole_dollars(501)
(1234568, 5, 6)
>>> import datetime as dt
>>> from pathlib import Path
>>> from auditflow.fincen import FUNNEL
>>> filer = Filer.load(Path(__file__).parents[1] / "deploy" / "filer.example.json")
>>> filing = SarFiling(
...     case_id="CASE-0001", filing_date=dt.date(2024, 3, 1),
...     activity_start=dt.date(2022, 9, 1), activity_end=dt.date(2022, 9, 10),
...     amount_cents=123456789, categories=(FUNNEL,),
...     subjects=(SarSubject(account_id="8000EBD30", bank_id="010"),),
...     narrative="Funds from 14 accounts were gathered in account 8000EBD30 and wired abroad.")
>>> xml = sar_batch_xml(filing, filer)
>>> xml.startswith(b'<?xml version="1.0" encoding="UTF-8"?>'), validate_sar_xml(xml)
(True, [])
>>> print(*validate_sar_xml(xml.replace(b'PartyCount="1"', b'PartyCount="2"')))  # doctest: +NORMALIZE_WHITESPACE
EFilingBatchXML/@PartyCount: the attribute says 2, the document has 1 Party element(s)
with ActivityPartyTypeCode 33 (Subject)
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, fields
from datetime import date
from decimal import Decimal, InvalidOperation
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar

from lxml import etree

from auditflow.errors import FieldError
from auditflow.fincen import ActivityCategory
from auditflow.records import ID_PATTERN, ID_REASON

__all__ = [
    "Address",
    "Filer",
    "Institution",
    "SarFiling",
    "SarInputError",
    "SarInvalid",
    "SarSubject",
    "check_sar_xml",
    "narrative_blocks",
    "sar_batch_xml",
    "validate_sar_xml",
    "whole_dollars",
]

#: FinCEN's namespace (the schema's ``targetNamespace``) and the prefix FinCEN's examples use.
NS = "www.fincen.gov/base"
PREFIX = "fc2"
XSI = "http://www.w3.org/2001/XMLSchema-instance"
SCHEMA_LOCATION = f"{NS} https://www.fincen.gov/base/EFL_SARXBatchSchema.xsd"
SCHEMA_FILE = "EFL_SARXBatchSchema.xsd"
FORM_TYPE_CODE = "SARX"

NARRATIVE_BLOCK_CHARS = 4000
NARRATIVE_MAX_BLOCKS = 5
NARRATIVE_MAX_CHARS = NARRATIVE_BLOCK_CHARS * NARRATIVE_MAX_BLOCKS

#: Party types every SAR needs (``ActivityPartyTypeCode``), in the order this module writes them.
REQUIRED_PARTY_TYPES = {
    "35": "Transmitter",
    "37": "Transmitter contact",
    "30": "Filing institution",
    "8": "Contact office",
    "34": "Institution where activity occurred",
    "33": "Subject",
}
#: Party types a SAR has exactly once.
SINGLE_PARTY_TYPES = ("35", "37", "30")

#: ``PrimaryRegulatorTypeCode`` (the schema's enumeration) and FinCEN's names for the codes.
PRIMARY_REGULATORS = {
    "1": "Federal Reserve",
    "2": "FDIC",
    "3": "NCUA",
    "4": "OCC",
    "6": "SEC",
    "7": "IRS",
    "9": "CFTC",
    "13": "FHFA",
    "99": "Not applicable",
}
#: ``OrganizationTypeID`` (type of financial institution).
INSTITUTION_TYPES = {
    1: "Casino/Card club",
    2: "Depository institution",
    3: "Insurance company",
    4: "Money Services Business (MSB)",
    5: "Securities/Futures",
    11: "Loan or Finance Company",
    12: "Housing GSE",
    999: "Other",
}
#: TIN types of an institution -> ``PartyIdentificationTypeCode``.
TIN_TYPES = {"EIN": "2", "SSN/ITIN": "1", "Foreign": "9"}

# The schema's maxLength of the elements the input fills.
_MAX_FULL_NAME = 150  # RawPartyFullName, RawEntityIndividualLastName
_MAX_FIRST_NAME = 35  # RawIndividualFirstName
_MAX_STREET = 100  # RawStreetAddress1Text
_MAX_CITY = 50  # RawCityText, OtherOrganizationTypeText, OtherSuspiciousActivityTypeText
_MAX_ID = 25  # PartyIdentificationNumberText, SubjectRelationshipFinancialInstitutionTINText
_MAX_ACCOUNT = 40  # AccountNumberText
_MAX_PHONE = 16  # PhoneNumberText
_MAX_PHONE_EXT = 6  # PhoneNumberExtensionText
_MAX_AMOUNT_DIGITS = 15  # TotalSuspiciousAmountText
_MAX_SUBJECTS = 999

# The schema's pattern for restricted strings, non-empty: XSD's \S is "not space, tab, CR or LF".
_CLEAN_TEXT = re.compile(r"[^ \t\r\n]+( +[^ \t\r\n]+)*")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# Characters XML 1.0 cannot carry (the narrative keeps tab, CR and LF).
_XML_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
# The schema's date patterns (DateYYYYMMDDType; DateYYYYMMDDOrBlankTypeDOB allows 00 for month and day)
_DATE_TEXT = re.compile(r"(19|20)[0-9][0-9](0[1-9]|1[0-2])(0[1-9]|1[0-9]|2[0-9]|3[01])")
_BIRTH_DATE_TEXT = re.compile(r"(19|20)[0-9][0-9](0[0-9]|1[0-2])(0[0-9]|1[0-9]|2[0-9]|3[01])")
_SENTENCE_END = re.compile(r"[.!?][\"')\]]*[ \t\r\n]+|\n[ \t\r\n]*")
_SPACES = re.compile(r"[ \t\r\n]+")


class SarInputError(FieldError):
    """The input cannot make a valid SAR: ``str()`` names the field, its value and what was expected.

    A :class:`auditflow.errors.FieldError`, so a ``ValueError``."""

    def within(self, prefix: str) -> SarInputError:
        """The same error with ``prefix.`` before the field name."""
        return SarInputError(f"{prefix}.{self.field}", self.value, self.reason)


class SarInvalid(ValueError):
    """The document fails FinCEN's schema or batch rules; ``.problems`` lists them all."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        more = len(self.problems) - 1
        suffix = f" (and {more} more problem{'s' if more != 1 else ''})" if more else ""
        super().__init__(f"{self.problems[0]}{suffix}")


# ---------------------------------------------------------------------------------------------
# Input checks
# ---------------------------------------------------------------------------------------------


def _text(value: object, field: str, max_len: int, element: str) -> str:
    """``value`` if it is text FinCEN's schema takes in ``element`` (at most ``max_len``)."""
    if type(value) is not str:
        raise SarInputError(field, value, f"expected text ({element})")
    if not _CLEAN_TEXT.fullmatch(value) or _CONTROL.search(value):
        raise SarInputError(
            field,
            value,
            f"expected non-empty text without leading or trailing spaces, line breaks, tabs or other "
            f"control characters ({element}; the schema's pattern \\S+( +\\S+)*)",
        )
    if len(value) > max_len:
        raise SarInputError(
            field, value, f"{len(value)} characters, more than {max_len}, the schema's maxLength for {element}"
        )
    return value


def _optional_text(value: object, field: str, max_len: int, element: str) -> str | None:
    return None if value is None else _text(value, field, max_len, element)


def _digits(value: object, field: str, what: str, *, lengths: tuple[int, ...] = (), max_len: int = 0) -> str:
    if type(value) is not str or not value.isascii() or not value.isdigit():
        raise SarInputError(field, value, f"expected {what}: digits only, no hyphens, spaces or other punctuation")
    if lengths and len(value) not in lengths:
        expected = " or ".join(str(n) for n in lengths)
        raise SarInputError(field, value, f"expected {what}: {expected} digits, got {len(value)}")
    if max_len and len(value) > max_len:
        raise SarInputError(field, value, f"expected {what}: at most {max_len} digits, got {len(value)}")
    return value


def _bool(value: object, field: str) -> bool:
    if type(value) is not bool:
        raise SarInputError(field, value, "expected true or false")
    return value


def _plain_date(value: object, field: str) -> date:
    if type(value) is not date:  # a datetime is a date too: refused, a SAR's dates are days
        raise SarInputError(field, value, "expected a datetime.date (a day, not a datetime)")
    if not 1900 <= value.year <= 2099:
        raise SarInputError(field, value, "expected a year from 1900 to 2099 (the schema's date pattern)")
    return value


def _set(obj: object, name: str, value: object) -> None:
    object.__setattr__(obj, name, value)  # normalising a field of a frozen dataclass


class _FromDict:
    """``from_dict`` for the frozen dataclasses below: unknown and missing keys named, nested
    objects built from nested mappings, every error prefixed with where it is."""

    _NESTED: ClassVar[dict[str, type]] = {}

    @classmethod
    def _from_mapping(cls, d: object, path: str) -> Any:
        if not isinstance(d, Mapping):
            raise SarInputError(path, d, "expected a JSON object")
        names = [f.name for f in fields(cls)]  # type: ignore[arg-type]
        unknown = sorted(str(k) for k in d if k not in names)
        if unknown:
            raise SarInputError(f"{path}.{unknown[0]}", d[unknown[0]], f"unknown field; expected one of {names}")
        kwargs: dict[str, Any] = {}
        for f in fields(cls):  # type: ignore[arg-type]
            if f.name not in d:
                if f.default is MISSING:
                    raise SarInputError(f"{path}.{f.name}", None, "missing: this field is required")
                continue
            value = d[f.name]
            nested = cls._NESTED.get(f.name)
            if nested is not None and value is not None:
                value = nested._from_mapping(value, f"{path}.{f.name}")  # type: ignore[attr-defined]
            kwargs[f.name] = value
        try:
            return cls(**kwargs)
        except SarInputError as e:
            raise e.within(path) from None


@dataclass(frozen=True)
class Address(_FromDict):
    """A postal address. ``state`` is a 2-letter code, required for US, CA and MX; ``zip_code`` is 5
    or 9 digits in the US (no hyphen), at most 9 characters elsewhere; ``country`` an ISO 3166 code."""

    street: str
    city: str
    zip_code: str
    state: str | None = None
    country: str = "US"

    def __post_init__(self) -> None:
        _text(self.street, "street", _MAX_STREET, "RawStreetAddress1Text")
        _text(self.city, "city", _MAX_CITY, "RawCityText")
        if type(self.country) is not str or re.fullmatch(r"[A-Z]{2}", self.country) is None:
            raise SarInputError("country", self.country, "expected a 2-letter country code in capitals (e.g. US)")
        if self.state is None:
            if self.country in ("US", "CA", "MX"):
                raise SarInputError("state", None, f"required when the country is {self.country}")
        elif type(self.state) is not str or re.fullmatch(r"[A-Z]{2}", self.state) is None:
            raise SarInputError("state", self.state, "expected a 2-letter state/province code in capitals (e.g. VA)")
        if self.country == "US":
            _digits(self.zip_code, "zip_code", "a US ZIP code", lengths=(5, 9))
        else:
            _text(self.zip_code, "zip_code", 9, "RawZIPCode")


@dataclass(frozen=True)
class Institution(_FromDict):
    """A financial institution as the SAR names it (the filing institution, or the one where the
    activity occurred). ``primary_regulator`` is FinCEN's code or name (:data:`PRIMARY_REGULATORS`),
    kept as the code; ``institution_type`` the code or name of :data:`INSTITUTION_TYPES` (2,
    depository institution, by default), kept as the code, with ``institution_type_other`` its
    description when it is 999 (Other); ``tin_type`` a key of :data:`TIN_TYPES`; ``rssd`` the
    Federal Reserve RSSD number, if the institution has one."""

    legal_name: str
    tin: str
    primary_regulator: str
    address: Address
    tin_type: str = "EIN"
    institution_type: int = 2
    institution_type_other: str | None = None
    rssd: str | None = None

    _NESTED: ClassVar[dict[str, type]] = {"address": Address}

    def __post_init__(self) -> None:
        _text(self.legal_name, "legal_name", _MAX_FULL_NAME, "RawPartyFullName")
        if self.tin_type not in TIN_TYPES:
            raise SarInputError("tin_type", self.tin_type, f"expected one of {sorted(TIN_TYPES)}")
        if self.tin_type == "Foreign":
            _text(self.tin, "tin", _MAX_ID, "PartyIdentificationNumberText")
        else:
            _digits(self.tin, "tin", f"a 9-digit {self.tin_type}", lengths=(9,))
        _set(self, "primary_regulator", _code(self.primary_regulator, "primary_regulator", PRIMARY_REGULATORS))
        kind = _code(self.institution_type, "institution_type", {str(k): v for k, v in INSTITUTION_TYPES.items()})
        _set(self, "institution_type", int(kind))
        if self.institution_type == 999:
            _text(self.institution_type_other, "institution_type_other", _MAX_CITY, "OtherOrganizationTypeText")
        elif self.institution_type_other is not None:
            raise SarInputError("institution_type_other", self.institution_type_other, "only for institution_type 999")
        if not isinstance(self.address, Address):
            raise SarInputError("address", self.address, "expected an Address")
        if self.rssd is not None:
            _digits(self.rssd, "rssd", "an RSSD number", max_len=10)


def _code(value: object, field: str, codes: Mapping[str, str]) -> str:
    """The code ``value`` names: the code itself (text or integer) or its name."""
    key = str(value) if type(value) in (str, int) else None
    if key is not None and key in codes:
        return key
    for code, name in codes.items():
        if value == name:
            return code
    raise SarInputError(field, value, f"expected one of FinCEN's codes {dict(codes)} (the code or the name)")


@dataclass(frozen=True)
class Filer(_FromDict):
    """The institution's fixed fields of every SAR it files (load them with :meth:`load`).

    ``transmitter_tcc`` is the Transmitter Control Code FinCEN assigned (8 characters);
    ``transmitter_tin`` a 9-digit TIN; phones are digits only (``PhoneNumberText``).
    ``activity_institution`` is where the activity occurred (None: the filing institution itself);
    ``activity_branch`` the branch's address (None: no branch involved). ``bank_id`` is the
    institution's bank id in the product's transaction data (AMLworld's bank number): a subject whose
    account is at that bank is recorded as the institution's customer with its TIN."""

    transmitter_name: str
    transmitter_tcc: str
    transmitter_tin: str
    transmitter_address: Address
    transmitter_phone: str
    transmitter_contact_name: str
    institution: Institution
    contact_office_name: str
    contact_office_phone: str
    contact_office_phone_extension: str | None = None
    activity_institution: Institution | None = None
    activity_branch: Address | None = None
    bank_id: str | None = None

    _NESTED: ClassVar[dict[str, type]] = {
        "transmitter_address": Address,
        "institution": Institution,
        "activity_institution": Institution,
        "activity_branch": Address,
    }

    def __post_init__(self) -> None:
        _text(self.transmitter_name, "transmitter_name", _MAX_FULL_NAME, "RawPartyFullName")
        if type(self.transmitter_tcc) is not str or re.fullmatch(r"[A-Z0-9]{8}", self.transmitter_tcc) is None:
            raise SarInputError(
                "transmitter_tcc", self.transmitter_tcc, "expected FinCEN's Transmitter Control Code: 8 of A-Z 0-9"
            )
        _digits(self.transmitter_tin, "transmitter_tin", "a 9-digit TIN", lengths=(9,))
        _digits(self.transmitter_phone, "transmitter_phone", "a phone number", max_len=_MAX_PHONE)
        _text(self.transmitter_contact_name, "transmitter_contact_name", _MAX_FULL_NAME, "RawPartyFullName")
        _text(self.contact_office_name, "contact_office_name", _MAX_FULL_NAME, "RawPartyFullName")
        _digits(self.contact_office_phone, "contact_office_phone", "a phone number", max_len=_MAX_PHONE)
        if self.contact_office_phone_extension is not None:
            _digits(
                self.contact_office_phone_extension,
                "contact_office_phone_extension",
                "a phone extension",
                max_len=_MAX_PHONE_EXT,
            )
        for name, kind in self._NESTED.items():
            value = getattr(self, name)
            optional = name in ("activity_institution", "activity_branch")
            if not isinstance(value, kind) and not (optional and value is None):
                raise SarInputError(name, value, f"expected {'None or ' if optional else ''}{kind.__name__}")
        if self.bank_id is not None and (type(self.bank_id) is not str or not ID_PATTERN.fullmatch(self.bank_id)):
            raise SarInputError("bank_id", self.bank_id, ID_REASON)

    @property
    def activity_site(self) -> Institution:
        """The institution where the activity occurred: :attr:`activity_institution`, else the filer."""
        return self.activity_institution or self.institution

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Filer:
        """A Filer from decoded JSON; :class:`SarInputError` names the first bad field by its path
        (``filer.institution.tin``), its value and what was expected."""
        return cls._from_mapping(d, "filer")

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Filer:
        """The Filer in the JSON file ``path`` (see ``deploy/filer.example.json``)."""
        p = Path(path)
        text = p.read_text(encoding="utf-8")
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise SarInputError(
                "filer file", str(p), f"not JSON: {e.msg} at line {e.lineno} column {e.colno}"
            ) from None
        return cls.from_dict(data)


@dataclass(frozen=True)
class SarSubject:
    """One account holder as the product knows it: by bank and account.

    ``name`` is the entity's legal name or the individual's last name (None: unknown, recorded with
    the schema's unknown indicators); ``first_name`` an individual's first name, if known;
    ``entity`` says the subject is an entity, not an individual. ``sender`` and ``receiver`` are the
    subject's role in the activity (purchaser/sender, payee/receiver, or both)."""

    account_id: str
    bank_id: str
    name: str | None = None
    first_name: str | None = None
    entity: bool = False
    sender: bool = False
    receiver: bool = False

    def __post_init__(self) -> None:
        for field in ("account_id", "bank_id"):
            value = getattr(self, field)
            if type(value) is not str or not ID_PATTERN.fullmatch(value):
                raise SarInputError(field, value, ID_REASON)
        _text(self.account_id, "account_id", _MAX_ACCOUNT, "AccountNumberText")
        _optional_text(self.name, "name", _MAX_FULL_NAME, "RawEntityIndividualLastName")
        _optional_text(self.first_name, "first_name", _MAX_FIRST_NAME, "RawIndividualFirstName")
        for field in ("entity", "sender", "receiver"):
            _bool(getattr(self, field), field)
        if self.entity and self.first_name is not None:
            raise SarInputError("first_name", self.first_name, "an entity has no first name (entity=True)")
        if self.first_name is not None and self.name is None:
            raise SarInputError("name", None, "a first name without a last name: give the last name as name")


@dataclass(frozen=True)
class SarFiling:
    """One SAR from a case. ``amount_cents`` is the total suspicious amount in US cents (written in
    whole dollars, rounded up); ``prior_document_number`` is the BSA ID of the prior report (None: an
    initial report; 14 zeros: a prior report whose BSA ID is unknown), which this one continues, or
    corrects when ``corrects_prior``."""

    case_id: str
    filing_date: date
    activity_start: date
    activity_end: date
    amount_cents: int
    categories: tuple[ActivityCategory, ...]
    subjects: tuple[SarSubject, ...]
    narrative: str
    prior_document_number: str | None = None
    corrects_prior: bool = False

    def __post_init__(self) -> None:
        _text(self.case_id, "case_id", _MAX_ID, "PartyIdentificationNumberText (internal control/file number)")
        _plain_date(self.filing_date, "filing_date")
        _plain_date(self.activity_start, "activity_start")
        _plain_date(self.activity_end, "activity_end")
        if self.activity_end < self.activity_start:
            raise SarInputError(
                "activity_end", self.activity_end, f"before activity_start {self.activity_start.isoformat()}"
            )
        if self.activity_end > self.filing_date:
            raise SarInputError(
                "activity_end", self.activity_end, f"after the filing date {self.filing_date.isoformat()}"
            )
        if type(self.amount_cents) is not int or self.amount_cents < 0:
            raise SarInputError("amount_cents", self.amount_cents, "expected a whole number of US cents, 0 or more")
        if len(str(whole_dollars(self.amount_cents))) > _MAX_AMOUNT_DIGITS:
            raise SarInputError(
                "amount_cents", self.amount_cents, f"more than {_MAX_AMOUNT_DIGITS} digits in whole dollars"
            )
        self._check_categories()
        if type(self.subjects) is not tuple or not self.subjects:
            raise SarInputError("subjects", self.subjects, "expected a non-empty tuple of SarSubject")
        if len(self.subjects) > _MAX_SUBJECTS:
            raise SarInputError("subjects", len(self.subjects), f"more than {_MAX_SUBJECTS} subjects")
        seen: set[tuple[str, str]] = set()
        for i, s in enumerate(self.subjects):
            if not isinstance(s, SarSubject):
                raise SarInputError(f"subjects[{i}]", s, "expected a SarSubject")
            if (s.bank_id, s.account_id) in seen:
                raise SarInputError(f"subjects[{i}]", f"{s.bank_id}/{s.account_id}", "the same account twice")
            seen.add((s.bank_id, s.account_id))
        narrative_blocks(self.narrative)  # refuses what cannot be written
        if self.prior_document_number is not None:
            _digits(self.prior_document_number, "prior_document_number", "a BSA ID", lengths=(14,))
        _bool(self.corrects_prior, "corrects_prior")
        if self.corrects_prior and self.prior_document_number is None:
            raise SarInputError("corrects_prior", True, "a correction needs prior_document_number")

    def _check_categories(self) -> None:
        if type(self.categories) is not tuple or not self.categories:
            raise SarInputError("categories", self.categories, "expected a non-empty tuple of ActivityCategory")
        if len(self.categories) > 99:
            raise SarInputError("categories", len(self.categories), "more than 99 (the schema's maxOccurs)")
        subtypes: set[int] = set()
        for i, c in enumerate(self.categories):
            field = f"categories[{i}]"
            if not isinstance(c, ActivityCategory) or type(c.type_id) is not int or type(c.subtype_id) is not int:
                raise SarInputError(field, c, "expected an auditflow.fincen.ActivityCategory")
            # FinCEN numbers a subtype after its type: 824 is type 8's, 12999 ("Other") type 12's
            owner = c.subtype_id // 1000 if c.subtype_id % 1000 == 999 else c.subtype_id // 100
            if owner != c.type_id:
                raise SarInputError(field, c.code, f"subtype {c.subtype_id} is not of type {c.type_id}")
            if c.subtype_id in subtypes:
                raise SarInputError(field, c.code, "the same subtype twice (the schema allows each once)")
            subtypes.add(c.subtype_id)
            if c.subtype_id % 1000 == 999:
                _text(c.subtype, f"{field}.subtype", _MAX_CITY, "OtherSuspiciousActivityTypeText")


def whole_dollars(cents: int) -> int:
    """``cents`` US cents in whole dollars, rounded up to the next whole dollar (FinCEN's rule).

    >>> whole_dollars(0), whole_dollars(1), whole_dollars(1526525)
    (0, 1, 15266)
    """
    if type(cents) is not int or cents < 0:
        raise SarInputError("amount_cents", cents, "expected a whole number of US cents, 0 or more")
    return -(-cents // 100)


def narrative_blocks(text: str) -> list[str]:
    """``text`` as FinCEN's narrative blocks: at most 5 of at most 4,000 characters, cut after a
    sentence where possible, else after a space, else (a 4,000-character word) anywhere. The blocks
    joined are ``text``; a narrative over 20,000 characters is refused, never cut.

    >>> narrative_blocks("Short narrative.")
    ['Short narrative.']
    >>> [len(b) for b in narrative_blocks("Funds moved onward. " * 600)]
    [4000, 4000, 4000]
    >>> narrative_blocks("x" * 20001)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    cases.sar_xml.SarInputError: narrative='xxx...: 20001 characters, more than FinCEN's limit of 20000 ...
    """
    if type(text) is not str:
        raise SarInputError("narrative", text, "expected text")
    if len(text) > NARRATIVE_MAX_CHARS:
        raise SarInputError(
            "narrative",
            text,
            f"{len(text)} characters, more than FinCEN's limit of {NARRATIVE_MAX_CHARS} "
            f"({NARRATIVE_MAX_BLOCKS} blocks of {NARRATIVE_BLOCK_CHARS}); shorten it",
        )
    if not text.strip():
        raise SarInputError("narrative", text, "empty: a SAR needs a narrative")
    bad = _XML_ILLEGAL.search(text)
    if bad:
        raise SarInputError(
            "narrative", text, f"character {bad.group()!r} at position {bad.start()} cannot be written in XML"
        )
    for level in (2, 1, 0):  # sentences, words, anywhere: the first that fits in 5 blocks
        blocks = _split(text, level)
        if len(blocks) <= NARRATIVE_MAX_BLOCKS:
            return blocks
    raise AssertionError("unreachable: 4,000-character blocks of 20,000 characters are 5")  # pragma: no cover


def _split(text: str, level: int) -> list[str]:
    blocks, start, limit = [], 0, NARRATIVE_BLOCK_CHARS
    while len(text) - start > limit:
        window = text[start : start + limit]
        cut = _cut(window, level)
        blocks.append(window[:cut])
        start += cut
    blocks.append(text[start:])
    return blocks


def _cut(window: str, level: int) -> int:
    """Where to end a block taken from ``window``: after the last sentence end in its second half
    (level 2), else after the last run of spaces (level >= 1), else at the window's end."""
    if level >= 2:
        ends = [m.end() for m in _SENTENCE_END.finditer(window)]
        if ends and ends[-1] >= len(window) // 2:
            return ends[-1]
    if level >= 1:
        ends = [m.end() for m in _SPACES.finditer(window)]
        if ends and ends[-1] > 0:
            return ends[-1]
    return len(window)


# ---------------------------------------------------------------------------------------------
# The document
# ---------------------------------------------------------------------------------------------


def _q(local: str) -> str:
    return f"{{{NS}}}{local}"


def _el(parent: etree._Element, local: str, text: str) -> etree._Element:
    """A leaf element with text."""
    el = etree.SubElement(parent, _q(local))
    el.text = text
    return el


def _node(parent: etree._Element, local: str) -> etree._Element:
    """An element of a complex type: it carries a SeqNum (numbered once the document is complete)."""
    return etree.SubElement(parent, _q(local), SeqNum="0")


def _party(activity: etree._Element, type_code: str) -> etree._Element:
    party = _node(activity, "Party")
    _el(party, "ActivityPartyTypeCode", type_code)
    return party


def _full_name(party: etree._Element, name: str) -> None:
    el = _node(party, "PartyName")
    _el(el, "PartyNameTypeCode", "L")
    _el(el, "RawPartyFullName", name)


def _address(party: etree._Element, a: Address) -> None:
    el = _node(party, "Address")
    _el(el, "RawCityText", a.city)
    _el(el, "RawCountryCodeText", a.country)
    if a.state is not None:
        _el(el, "RawStateCodeText", a.state)
    _el(el, "RawStreetAddress1Text", a.street)
    _el(el, "RawZIPCode", a.zip_code)


def _phone(party: etree._Element, number: str, extension: str | None = None) -> None:
    el = _node(party, "PhoneNumber")
    if extension is not None:
        _el(el, "PhoneNumberExtensionText", extension)
    _el(el, "PhoneNumberText", number)


def _identification(party: etree._Element, number: str, type_code: str) -> None:
    el = _node(party, "PartyIdentification")
    _el(el, "PartyIdentificationNumberText", number)
    _el(el, "PartyIdentificationTypeCode", type_code)


def _institution_party(
    activity: etree._Element, type_code: str, inst: Institution, *, case_id: str | None, branch: Address | None
) -> None:
    party = _party(activity, type_code)
    if type_code == "34" and branch is None:
        _el(party, "NoBranchActivityInvolvedIndicator", "Y")
    _el(party, "PrimaryRegulatorTypeCode", inst.primary_regulator)
    _full_name(party, inst.legal_name)
    _address(party, inst.address)
    _identification(party, inst.tin, TIN_TYPES[inst.tin_type])
    if inst.rssd is not None:
        _identification(party, inst.rssd, "14")
    if case_id is not None:
        _identification(party, case_id, "29")  # the filer's internal control/file number
    org = _node(party, "OrganizationClassificationTypeSubtype")
    _el(org, "OrganizationTypeID", str(inst.institution_type))
    if inst.institution_type_other is not None:
        _el(org, "OtherOrganizationTypeText", inst.institution_type_other)
    if type_code == "34" and branch is not None:
        branch_party = _party(_node(party, "PartyAssociation"), "46")
        _address(branch_party, branch)


def _subject_party(activity: etree._Element, s: SarSubject, filer: Filer) -> None:
    party = _party(activity, "33")
    individual = not s.entity
    if individual:
        _el(party, "BirthDateUnknownIndicator", "Y")
    if s.sender and s.receiver:
        _el(party, "BothPurchaserSenderPayeeReceiveIndicator", "Y")
    if s.entity:
        _el(party, "PartyAsEntityOrganizationIndicator", "Y")
    if s.receiver and not s.sender:
        _el(party, "PayeeReceiverIndicator", "Y")
    if s.sender and not s.receiver:
        _el(party, "PurchaserSenderIndicator", "Y")
    if individual:
        _el(party, "UnknownGenderIndicator", "Y")

    name = _node(party, "PartyName")
    if s.name is None:
        _el(name, "EntityLastNameUnknownIndicator", "Y")
    if individual and s.first_name is None:
        _el(name, "FirstNameUnknownIndicator", "Y")
    _el(name, "PartyNameTypeCode", "L")
    if s.name is not None:
        _el(name, "RawEntityIndividualLastName", s.name)
    if s.first_name is not None:
        _el(name, "RawIndividualFirstName", s.first_name)

    address = _node(party, "Address")
    for indicator in ("City", "CountryCode", "StateCode", "StreetAddress", "ZIPCode"):
        _el(address, f"{indicator}UnknownIndicator", "Y")
    _el(_node(party, "PartyIdentification"), "TINUnknownIndicator", "Y")
    _el(_node(party, "PartyIdentification"), "IdentificationPresentUnknownIndicator", "Y")

    site = filer.activity_site
    at_filer = filer.bank_id is not None and s.bank_id == filer.bank_id
    if at_filer:
        relation = _node(party, "PartyAssociation")
        _el(relation, "CustomerIndicator", "Y")
        _el(relation, "SubjectRelationshipFinancialInstitutionTINText", site.tin)

    accounts = _node(party, "PartyAccountAssociation")
    _el(accounts, "PartyAccountAssociationTypeCode", "7")
    bank = _party(accounts, "41")
    ident = _node(bank, "PartyIdentification")
    if at_filer:
        _el(ident, "PartyIdentificationNumberText", site.tin)
        _el(ident, "PartyIdentificationTypeCode", TIN_TYPES[site.tin_type])
    else:
        _el(ident, "TINUnknownIndicator", "Y")
    account = _node(bank, "Account")
    _el(account, "AccountNumberText", s.account_id)
    _el(_node(account, "PartyAccountAssociation"), "PartyAccountAssociationTypeCode", "5")


def _yyyymmdd(d: date) -> str:
    return f"{d.year:04d}{d.month:02d}{d.day:02d}"


def sar_batch_xml(filing: SarFiling, filer: Filer) -> bytes:
    """The FinCEN SAR batch document of ``filing`` (one ``Activity``): UTF-8 with an XML
    declaration, the same bytes for the same input. It is checked (:func:`check_sar_xml`) before it
    is returned, so a document that fails FinCEN's schema or batch rules is never handed out."""
    if not isinstance(filing, SarFiling):
        raise SarInputError("filing", filing, "expected a SarFiling")
    if not isinstance(filer, Filer):
        raise SarInputError("filer", filer, "expected a Filer")
    blocks = narrative_blocks(filing.narrative)
    dollars = whole_dollars(filing.amount_cents)

    root = etree.Element(_q("EFilingBatchXML"), nsmap={PREFIX: NS, "xsi": XSI})
    root.set("TotalAmount", str(dollars))
    root.set("PartyCount", str(len(filing.subjects)))
    root.set("ActivityCount", "1")
    root.set("ActivityAttachmentCount", "0")
    root.set("AttachmentCount", "0")
    root.set(f"{{{XSI}}}schemaLocation", SCHEMA_LOCATION)
    _el(root, "FormTypeCode", FORM_TYPE_CODE)

    activity = _node(root, "Activity")
    if filing.prior_document_number is not None:
        _el(activity, "EFilingPriorDocumentNumber", filing.prior_document_number)
    _el(activity, "FilingDateText", _yyyymmdd(filing.filing_date))
    association = _node(activity, "ActivityAssociation")
    if filing.prior_document_number is None:
        _el(association, "InitialReportIndicator", "Y")
    elif filing.corrects_prior:
        _el(association, "CorrectsAmendsPriorReportIndicator", "Y")
    else:
        _el(association, "ContinuingActivityReportIndicator", "Y")

    transmitter = _party(activity, "35")
    _full_name(transmitter, filer.transmitter_name)
    _address(transmitter, filer.transmitter_address)
    _phone(transmitter, filer.transmitter_phone)
    _identification(transmitter, filer.transmitter_tin, "4")
    _identification(transmitter, filer.transmitter_tcc, "28")
    _full_name(_party(activity, "37"), filer.transmitter_contact_name)
    _institution_party(activity, "30", filer.institution, case_id=filing.case_id, branch=None)
    contact = _party(activity, "8")
    _full_name(contact, filer.contact_office_name)
    _phone(contact, filer.contact_office_phone, filer.contact_office_phone_extension)
    _institution_party(activity, "34", filer.activity_site, case_id=None, branch=filer.activity_branch)
    for subject in filing.subjects:
        _subject_party(activity, subject, filer)

    suspicious = _node(activity, "SuspiciousActivity")
    if dollars == 0:
        _el(suspicious, "NoAmountInvolvedIndicator", "Y")
    _el(suspicious, "SuspiciousActivityFromDateText", _yyyymmdd(filing.activity_start))
    if filing.activity_end != filing.activity_start:
        _el(suspicious, "SuspiciousActivityToDateText", _yyyymmdd(filing.activity_end))
    if dollars > 0:
        _el(suspicious, "TotalSuspiciousAmountText", str(dollars))
    for category in filing.categories:
        item = _node(suspicious, "SuspiciousActivityClassification")
        if category.subtype_id % 1000 == 999:
            _el(item, "OtherSuspiciousActivityTypeText", category.subtype)
        _el(item, "SuspiciousActivitySubtypeID", str(category.subtype_id))
        _el(item, "SuspiciousActivityTypeID", str(category.type_id))

    for number, block in enumerate(blocks, start=1):
        narrative = _node(activity, "ActivityNarrativeInformation")
        _el(narrative, "ActivityNarrativeSequenceNumber", str(number))
        _el(narrative, "ActivityNarrativeText", block)

    seq = 0
    for el in root.iter():
        if "SeqNum" in el.attrib:
            seq += 1
            el.set("SeqNum", str(seq))

    etree.indent(root, space="  ")
    xml = b'<?xml version="1.0" encoding="UTF-8"?>\n' + etree.tostring(root, encoding="UTF-8") + b"\n"
    check_sar_xml(xml)
    return xml


# ---------------------------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------------------------


@cache
def _schema() -> etree.XMLSchema:
    """FinCEN's schema, loaded once from the package's ``schemas`` folder."""
    xsd = resources.files("cases").joinpath("schemas", SCHEMA_FILE)
    with resources.as_file(xsd) as path:
        return etree.XMLSchema(etree.parse(str(path), etree.XMLParser(no_network=True, resolve_entities=False)))


@cache
def _space_restricted_elements() -> frozenset[str]:
    """The elements whose schema type carries the pattern ``\\S+( +\\S+)*|`` (``RestrictString2`` to
    ``RestrictString517``; the 4,000-character narrative type has none), read from the schema."""
    xsd = resources.files("cases").joinpath("schemas", SCHEMA_FILE)
    with resources.as_file(xsd) as path:
        tree = etree.parse(str(path), etree.XMLParser(no_network=True, resolve_entities=False))
    types = {
        t.get("name")
        for t in tree.iterfind("{http://www.w3.org/2001/XMLSchema}simpleType")
        if t.find("{http://www.w3.org/2001/XMLSchema}restriction/{http://www.w3.org/2001/XMLSchema}pattern") is not None
        and (t.get("name") or "").startswith("RestrictString")
    }
    return frozenset(
        e.get("name") for e in tree.iter("{http://www.w3.org/2001/XMLSchema}element") if e.get("type") in types
    )


def _local(tag: object) -> str:
    return etree.QName(tag).localname if isinstance(tag, str) else str(tag)


def _where(el: etree._Element) -> str:
    """``Activity/Party[3]/PhoneNumber/PhoneNumberText``: local names below the root, with the
    position among same-named siblings where there are several."""
    steps = []
    while el.getparent() is not None:
        parent = el.getparent()
        same = [c for c in parent if c.tag == el.tag]
        steps.append(_local(el.tag) + (f"[{same.index(el) + 1}]" if len(same) > 1 else ""))
        el = parent
    return "/".join(reversed(steps)) or _local(el.tag)


_XSD_MESSAGE = re.compile(r"Element '(?:\{[^}]*\})?([^']*)'(?:, attribute '([^']*)')?: (.*)", re.S)


def _xsd_line(error: Any, root: etree._Element) -> str:
    """One line for one schema error: element (and path), offending value, lxml's reason."""
    message = " ".join(str(error.message).split())
    m = _XSD_MESSAGE.fullmatch(message)
    local, attribute, reason = (m.group(1), m.group(2), m.group(3)) if m else ("", None, message)
    reason = re.sub(r"\{[^}]*\}", "", reason)
    node = None
    if error.path:
        prefixes = {p: u for p, u in root.nsmap.items() if p}
        try:
            found = root.getroottree().xpath(error.path, namespaces=prefixes)
            node = found[0] if isinstance(found, list) and found and isinstance(found[0], etree._Element) else None
        except etree.XPathError:
            node = None
    name = local or (_local(node.tag) if node is not None else "document")
    where = _where(node) if node is not None else ""
    if attribute:
        name = f"{name}/@{attribute}"
        where = f"{where}/@{attribute}" if where else ""
    value = None
    if node is not None:
        value = node.get(attribute) if attribute else (node.text if len(node) == 0 else None)
    parts = [name]
    if where and where != name and len(where) <= 120:
        parts.append(f" at {where}")
    if value is not None:
        parts.append(f" value {value!r}")
    return f"{''.join(parts)}: {reason} (line {error.line})"


def _int_attribute(root: etree._Element, name: str) -> int | None:
    try:
        return int(root.get(name, ""))
    except ValueError:
        return None  # absent or not a number: the schema reports it


def _batch_problems(root: etree._Element) -> list[str]:
    """FinCEN's batch rules that the schema cannot express."""
    if root.tag != _q("EFilingBatchXML"):
        return [f"root element is {root.tag!r}, expected EFilingBatchXML in namespace {NS!r}"]
    problems: list[str] = []
    activities = root.findall(_q("Activity"))

    def count(attribute: str, actual: int, what: str) -> None:
        said = _int_attribute(root, attribute)
        if said is not None and said != actual:
            problems.append(
                f"EFilingBatchXML/@{attribute}: the attribute says {said}, the document has {actual} {what}"
            )

    def party_type(party: etree._Element) -> str:
        return (party.findtext(_q("ActivityPartyTypeCode")) or "").strip()

    count("ActivityCount", len(activities), "Activity element(s)")
    subjects = sum(1 for a in activities for p in a.findall(_q("Party")) if party_type(p) == "33")
    count("PartyCount", subjects, "Party element(s) with ActivityPartyTypeCode 33 (Subject)")
    count(
        "ActivityAttachmentCount",
        sum(1 for a in activities if a.find(_q("ActivitySupportDocument")) is not None),
        "Activity element(s) with an ActivitySupportDocument",
    )
    count("AttachmentCount", len(root.findall(f"{_q('Activity')}/{_q('ActivitySupportDocument')}")), "attachment(s)")

    total, amounts_ok = 0, True
    for el in root.iter(
        _q("TotalSuspiciousAmountText"), _q("CumulativeTotalViolationAmountText"), _q("LossToFinancialAmountText")
    ):
        text = el.text or ""
        if not (text.isascii() and text.isdigit()):
            problems.append(
                f"{_local(el.tag)} at {_where(el)} value {text!r}: expected a whole number of U.S. dollars, digits only"
            )
            amounts_ok = amounts_ok and el.tag != _q("TotalSuspiciousAmountText")
        elif el.tag == _q("TotalSuspiciousAmountText"):
            total += int(text)
    said_total = root.get("TotalAmount")
    if said_total is not None and amounts_ok:
        try:
            said = Decimal(said_total.strip())
        except InvalidOperation:
            said = None  # the schema reports it
        if said is not None and said.is_finite() and said != total:
            problems.append(
                f"EFilingBatchXML/@TotalAmount: the attribute says {said_total}, the sum of the "
                f"TotalSuspiciousAmountText amounts is {total}"
            )

    holders: dict[str, list[etree._Element]] = {}
    for el in root.iter():
        if isinstance(el.tag, str) and "SeqNum" in el.attrib:
            holders.setdefault(el.get("SeqNum", ""), []).append(el)
    for seq, els in holders.items():
        if len(els) > 1:
            shown = ", ".join(_where(e) for e in els[:4]) + (", ..." if len(els) > 4 else "")
            problems.append(f"SeqNum {seq!r} is not unique: {len(els)} elements carry it ({shown})")

    for i, activity in enumerate(activities, start=1):
        label = f"Activity[{i}]" if len(activities) > 1 else "Activity"
        types = Counter(party_type(p) for p in activity.findall(_q("Party")))
        for code, name in REQUIRED_PARTY_TYPES.items():
            if types[code] == 0:
                problems.append(f"{label}: no Party with ActivityPartyTypeCode {code} ({name}); FinCEN requires one")
            elif code in SINGLE_PARTY_TYPES and types[code] > 1:
                problems.append(
                    f"{label}: {types[code]} Parties with ActivityPartyTypeCode {code} ({name}); FinCEN allows one"
                )
        numbers = [
            (n.findtext(_q("ActivityNarrativeSequenceNumber")) or "").strip()
            for n in activity.findall(_q("ActivityNarrativeInformation"))
        ]
        if numbers and numbers != [str(k) for k in range(1, len(numbers) + 1)]:
            problems.append(
                f"{label}/ActivityNarrativeInformation: the blocks are numbered {numbers}, expected 1 to {len(numbers)}"
            )

    patterned = _space_restricted_elements()
    for el in root.iter():
        if not isinstance(el.tag, str):
            continue
        local, text = _local(el.tag), el.text or ""
        if local in patterned and text.startswith(" "):
            # the schema's pattern \S+( +\S+)*| forbids it, but libxml2 lets leading spaces through
            problems.append(
                f"{local} at {_where(el)} value {text!r}: leading space (FinCEN: element values must not "
                f"include leading or trailing spaces; the schema's pattern \\S+( +\\S+)*)"
            )
        if not local.endswith("DateText"):
            continue
        birth = local == "IndividualBirthDateText"
        if not (_BIRTH_DATE_TEXT if birth else _DATE_TEXT).fullmatch(text):
            continue  # blank or off the pattern: the schema reports it
        y, mo, d = int(text[:4]), int(text[4:6]), int(text[6:])
        if birth and (mo == 0 or d == 0):
            continue  # a birth date may have 00 for an unknown month or day (schema v1.2)
        try:
            date(y, mo, d)
        except ValueError:
            problems.append(f"{local} at {_where(el)} value {text!r}: not a calendar date (YYYYMMDD)")
    return problems


def validate_sar_xml(xml: bytes) -> list[str]:
    """The problems of a SAR batch document, one line each; ``[]`` when it is valid.

    First FinCEN's schema (each error: the element, its path, the offending value where there is one,
    and lxml's reason), then the batch rules the schema cannot express: the ``EFilingBatchXML``
    counts and ``TotalAmount`` against the content, ``SeqNum`` unique, each required party type
    present (35, 37, 30, 8, 34, 33; 35, 37 and 30 once), amounts in whole dollars, narrative blocks
    numbered from 1, dates that exist."""
    if not isinstance(xml, (bytes, bytearray)):
        return [f"expected the document's bytes, got {type(xml).__name__}"]
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)
    try:
        root = etree.fromstring(bytes(xml), parser)
    except etree.XMLSyntaxError as e:
        return [f"not well-formed XML: {e}"]
    schema = _schema()
    problems = [] if schema.validate(root) else [_xsd_line(e, root) for e in schema.error_log]
    return problems + _batch_problems(root)


def check_sar_xml(xml: bytes) -> None:
    """Nothing when ``xml`` is a valid SAR batch; :class:`SarInvalid` (the first problem and how
    many more) otherwise."""
    problems = validate_sar_xml(xml)
    if problems:
        raise SarInvalid(problems)
