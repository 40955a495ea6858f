"""Findings as OCSF events (Open Cybersecurity Schema Framework, version :data:`OCSF_VERSION`, with
the ``cloud`` profile), one JSON object a line, for a SIEM or a security data lake.

A finding with a CVE (in its title or description) or a package is a **Vulnerability Finding**
(``class_uid`` 2002); any other (a misconfiguration, and the secrets and code weaknesses that
``findings_view`` does not tell apart from them) is a **Compliance Finding** (2003). The mapping
(see ``docs/guides/ci-and-siem.md`` for the table):

=======================  ================================================================
OCSF                     from the finding
=======================  ================================================================
severity_id, severity    ``severity`` 1..5 -> 1 Informational .. 5 Critical (0 Unknown)
status_id, status        ``actual_status.category`` FIXED -> 4 Resolved, IGNORED -> 3
                         Suppressed, OPEN -> 2 In Progress (status key 12, or a ticket or
                         remediation under way), else 1 New; ``status_code`` the status key,
                         ``status_detail`` the source's own status (``original_status``)
activity_id, type_uid    3 Close when not OPEN, 2 Update when reported again after it was
                         discovered, else 1 Create; ``type_uid`` = class_uid * 100 + activity_id
time                     ``last_reported_time`` (else ``discovered_time``, else the time of
                         the export), in ms since the epoch
finding_info             ``uid`` the finding's ``id``, ``uid_alt`` the source's ``finding_id``,
                         ``title``, ``desc`` the description, ``created_time`` and
                         ``first_seen_time`` ``discovered_time``, ``last_seen_time``
                         ``last_reported_time``, ``data_sources`` the datasource, ``product``
                         the reporting product (``source``)
resources                one: ``name`` ``resource_name``, ``type`` ``resource_type``, ``labels``
                         the datasource tags
cloud                    ``provider`` ``cloud_provider`` (``Unknown`` when missing: the cloud
                         profile requires it), ``account`` uid and name
vulnerabilities (2002)   one: ``cve.uid`` the CVE, or an ``advisory`` with the source's finding
                         id when there is none; title, severity, vendor_name, times (the
                         description is in ``finding_info.desc`` only)
compliance (2003)        ``control`` the title, ``status_id`` 3 Fail (OPEN, IGNORED) or 1 Pass
                         (FIXED)
metadata                 ``version`` :data:`OCSF_VERSION`, ``product`` the Security Findings
                         Management API (``version`` v1), ``log_provider`` secfindings and its
                         version, ``uid`` the finding's id, ``profiles`` ["cloud"]
unmapped                 ``score``, ``original_score``, ``sla_status``, ``due_date``,
                         ``remediation_sub_phase``, ``package_name`` (a package version, which
                         ``affected_packages`` requires, is not in the API), ``id_int``, ``age``
=======================  ================================================================

Fields the walk did not select are left out (required ones get the fallbacks above).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

from secfindings._export import Export
from secfindings._native import __version__
from secfindings.errors import ValidationError
from secfindings.formats import compact, cve_of, epoch_ms, nodes, value

__all__ = ["OCSF_VERSION", "OcsfExport", "to_ocsf"]

#: The OCSF version the records follow (``metadata.version``); the tests validate every record
#: against the JSON Schema of this version's classes 2002 and 2003 with the ``cloud`` profile.
OCSF_VERSION = "1.5.0"

VULNERABILITY_FINDING = 2002
COMPLIANCE_FINDING = 2003
_CLASS_NAMES = {VULNERABILITY_FINDING: "Vulnerability Finding", COMPLIANCE_FINDING: "Compliance Finding"}
_SEVERITY = {0: "Unknown", 1: "Informational", 2: "Low", 3: "Medium", 4: "High", 5: "Critical"}
_STATUS = {0: "Unknown", 1: "New", 2: "In Progress", 3: "Suppressed", 4: "Resolved"}
_ACTIVITY = {1: "Create", 2: "Update", 3: "Close"}
#: Remediation sub-phases that mean work on the finding has started.
_UNDER_WAY = frozenset({"TICKET_OPENED", "IN_REMEDIATION", "VERIFYING"})
_UNMAPPED = ("score", "original_score", "sla_status", "due_date", "remediation_sub_phase", "id_int", "age")


def _version() -> str:
    return str(__version__)


def _put(target: dict[str, Any], key: str, v: Any) -> None:
    """Sets ``key`` unless the value is missing (None or empty text or list)."""
    if v is None or v == "" or v == []:
        return
    target[key] = v


def _status_id(category: Any, key: Any, phase: Any) -> int:
    if category == "FIXED":
        return 4
    if category == "IGNORED":
        return 3
    if category == "OPEN":
        return 2 if key == "12" or phase in _UNDER_WAY else 1
    return 0


def to_ocsf(node: Mapping[str, Any], *, product_version: str | None = None) -> dict[str, Any]:
    """One finding (a node of ``findings_view``, nested as the server sent it or flattened with
    dotted names) as an OCSF Vulnerability Finding or Compliance Finding (see the module's
    mapping). Raises :class:`~secfindings.ValidationError` when it has neither ``id`` nor
    ``id_int`` (``finding_info.uid`` needs one)."""
    uid = _uid(node)
    title = value(node, "title")
    cve = cve_of(node)
    package = value(node, "package_name")
    class_uid = VULNERABILITY_FINDING if cve or package else COMPLIANCE_FINDING
    category = value(node, "actual_status.category")
    discovered = epoch_ms(value(node, "discovered_time"))
    reported = epoch_ms(value(node, "last_reported_time"))
    activity = _activity(category, discovered, reported)
    sev = value(node, "severity")
    severity_id = sev if isinstance(sev, int) and not isinstance(sev, bool) and 1 <= sev <= 5 else 0
    status_id = _status_id(category, value(node, "actual_status.key"), value(node, "remediation_sub_phase"))
    when = reported if reported is not None else discovered
    if when is None:
        when = int(time.time() * 1000)
    record: dict[str, Any] = {
        "category_uid": 2,
        "category_name": "Findings",
        "class_uid": class_uid,
        "class_name": _CLASS_NAMES[class_uid],
        "activity_id": activity,
        "activity_name": _ACTIVITY[activity],
        "type_uid": class_uid * 100 + activity,
        "type_name": f"{_CLASS_NAMES[class_uid]}: {_ACTIVITY[activity]}",
        "severity_id": severity_id,
        "severity": _SEVERITY[severity_id],
        "status_id": status_id,
        "status": _STATUS[status_id],
        "time": when,
        "finding_info": _finding_info(node, uid, title, discovered, reported),
        "cloud": _cloud(node),
        "metadata": {
            "version": OCSF_VERSION,
            "product": {"name": "Security Findings Management API", "version": "v1"},
            "log_provider": f"secfindings {product_version or _version()}",
            "uid": uid,
            "profiles": ["cloud"],
        },
    }
    _put(record, "message", title)
    _put(record, "status_code", value(node, "actual_status.key"))
    _put(record, "status_detail", value(node, "original_status"))
    resource = _resource(node)
    if resource:
        record["resources"] = [resource]
    if class_uid == VULNERABILITY_FINDING:
        record["vulnerabilities"] = [_vulnerability(node, uid, cve, severity_id, discovered, reported)]
    else:
        fail = category != "FIXED"
        compliance: dict[str, Any] = {"status_id": 3 if fail else 1, "status": "Fail" if fail else "Pass"}
        _put(compliance, "control", title)
        record["compliance"] = compliance
    unmapped = _unmapped(node, package)
    if unmapped:
        record["unmapped"] = unmapped
    return record


def _uid(node: Mapping[str, Any]) -> str:
    """The finding's id (``id``, else ``id_int``): ``finding_info.uid`` and ``metadata.uid``."""
    uid = value(node, "id")
    if uid is None or uid == "":
        uid = value(node, "id_int")
    if uid is None or uid == "":
        raise ValidationError("an OCSF record needs the finding's id: select id (or id_int) in fields=")
    return str(uid)


def _activity(category: Any, discovered: int | None, reported: int | None) -> int:
    """3 closed, 2 updated (reported again after it was found), 1 created."""
    if category is not None and category != "OPEN":
        return 3
    if reported is not None and discovered is not None and reported > discovered:
        return 2
    return 1


def _finding_info(
    node: Mapping[str, Any], uid: str, title: Any, discovered: int | None, reported: int | None
) -> dict[str, Any]:
    info: dict[str, Any] = {"uid": uid}
    _put(info, "title", title)
    _put(info, "desc", value(node, "description"))
    _put(info, "uid_alt", value(node, "finding_id"))
    _put(info, "created_time", discovered)
    _put(info, "first_seen_time", discovered)
    _put(info, "last_seen_time", reported)
    datasource = value(node, "datasource_friendly_name") or value(node, "source")
    if datasource:
        info["data_sources"] = [str(datasource)]
    source = value(node, "source")
    if source:
        info["product"] = {"name": str(source)}
    return info


def _cloud(node: Mapping[str, Any]) -> dict[str, Any]:
    cloud: dict[str, Any] = {"provider": str(value(node, "cloud_provider") or "Unknown")}
    account: dict[str, Any] = {}
    _put(account, "uid", value(node, "cloud_account"))
    _put(account, "name", value(node, "cloud_account_friendly_name"))
    if account:
        cloud["account"] = account
    return cloud


def _resource(node: Mapping[str, Any]) -> dict[str, Any]:
    """The finding's resource (empty when it names none)."""
    resource: dict[str, Any] = {}
    _put(resource, "name", value(node, "resource_name"))
    if resource:
        _put(resource, "type", value(node, "resource_type"))
        tags = value(node, "datasource_tags_values")
        if isinstance(tags, list) and tags:
            resource["labels"] = [str(t) for t in tags if t is not None]
    return resource


def _vulnerability(
    node: Mapping[str, Any],
    uid: str,
    cve: str | None,
    severity_id: int,
    discovered: int | None,
    reported: int | None,
) -> dict[str, Any]:
    """The vulnerability of a Vulnerability Finding: its CVE, else an advisory of the finding."""
    title = value(node, "title")
    vuln: dict[str, Any] = {}
    if cve:
        vuln["cve"] = {"uid": cve}
    else:
        advisory: dict[str, Any] = {"uid": str(value(node, "finding_id") or uid)}
        _put(advisory, "title", title)
        vuln["advisory"] = advisory
    _put(vuln, "title", title)
    if severity_id:
        vuln["severity"] = _SEVERITY[severity_id]
    _put(vuln, "vendor_name", value(node, "source"))
    _put(vuln, "first_seen_time", discovered)
    _put(vuln, "last_seen_time", reported)
    return vuln


def _unmapped(node: Mapping[str, Any], package: Any) -> dict[str, Any]:
    """The fields OCSF has no place for (a due date as text)."""
    unmapped: dict[str, Any] = {}
    for name in _UNMAPPED:
        _put(unmapped, name, value(node, name))
    _put(unmapped, "package_name", package)
    due = unmapped.get("due_date")
    if due is not None and not isinstance(due, str):
        unmapped["due_date"] = str(due)
    return unmapped


class OcsfExport(Export):
    """A streaming export of OCSF JSON lines: each page of nodes becomes a page of records,
    written and taken out whole as JSON lines are (resume with ``after=`` and ``append=True``)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        fmt: str,
        append: bool,
        native: Any = None,
        escape_formulas: bool = True,
    ) -> None:
        super().__init__(path, fmt, append, native, escape_formulas)
        self._product_version = _version()

    def encode(self, data: bytes) -> tuple[bytes, int]:
        """A page of nodes (JSON lines) as OCSF JSON lines, and how many records it holds."""
        lines = [compact(to_ocsf(node, product_version=self._product_version)) for node in nodes(data)]
        if not lines:
            return b"", 0
        return ("\n".join(lines) + "\n").encode("utf-8"), len(lines)
