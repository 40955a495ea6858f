"""Findings and what hangs off them: score, status, datasource, tickets, comments, attachments."""

from __future__ import annotations

import datetime as dt

from secfindings.models._base import Connection, JSONString, Model
from secfindings.models.resources import CHResource

__all__ = [
    "Attachment",
    "Comment",
    "Datasource",
    "Finding",
    "FindingAdditionalData",
    "FindingScore",
    "FindingsView",
    "Status",
    "Ticket",
]


class FindingScore(Model):
    """The score of a finding: risk ``score`` 0-10, ``severity`` 1 (info) to 5 (critical)."""

    score: float
    severity: int
    original_score: float | None


class Datasource(Model):
    """A source of findings (an installed integration)."""

    id: str
    id_int: int | None
    friendly_name: str
    source: str | None
    datasource_type: str | None


class Status(Model):
    """A finding status; ``category`` is a StatusCategoryEnum value such as ``"OPEN"``."""

    id: str
    id_int: int | None
    key: str | None
    title: str | None
    category: str | None
    type: str | None
    description: str | None


class Ticket(Model):
    """A ticket opened for findings; ``status`` is a TicketStatusEnum value (``"BACKLOG"``, ...)."""

    id: str
    id_int: int | None
    external_id: str | None
    link: str | None
    assignee: str | None
    status: str | None
    created_by_remediation_queue_id: int | None
    provider_type: str | None
    title: str | None
    created_time: dt.datetime | None


class Comment(Model):
    """A comment on a finding (markdown ``text``)."""

    id: str
    id_int: int | None
    text: str | None
    author: str | None
    created_time: dt.datetime | None


class Attachment(Model):
    """A file attached to a finding."""

    id: str
    id_int: int | None
    file_name: str | None
    content_type: str | None
    size: int | None
    url: str | None
    uploaded_by: str | None
    created_time: dt.datetime | None


class FindingAdditionalData(Model):
    """Raw data of the finding as the source reported it; ``data`` is decoded JSON."""

    id: str
    data: JSONString | None


class Finding(Model):
    """A security finding, as the ``finding`` query returns it.

    The fields are those of the spec's Finding table plus ``status``, ``tickets``, ``comments``,
    ``attachments`` (connections) and ``additional_data``. Times are aware datetimes.
    """

    id: str
    id_int: int
    finding_id: str
    last_reported_time: dt.datetime
    discovered_time: dt.datetime
    cloud_provider: str
    original_status: str
    cloud_account: str
    package_name: str | None
    datasource: Datasource
    main_resource: CHResource
    title: str
    finding_score: FindingScore
    age: int
    description: str
    status: Status
    tickets: Connection[Ticket]
    comments: Connection[Comment]
    attachments: Connection[Attachment]
    additional_data: FindingAdditionalData


class FindingsView(Model):
    """A row of ``findings_view``: a flattened finding (score, status and resource inline)."""

    id: str
    id_int: int | None
    title: str | None
    score: float | None
    severity: int | None
    remediation_sub_phase: str | None
    cloud_account: str | None
    cloud_account_friendly_name: str | None
    cloud_provider: str | None
    resource_name: str | None
    resource_type: str | None
    sla_status: str | None
    due_date: dt.datetime | None
    age: int | None
    datasource_tags_values: list[str] | None
    source: str | None
    datasource_friendly_name: str | None
    tickets: Connection[Ticket] | None
    actual_status: Status | None
    finding_id: str | None
    last_reported_time: dt.datetime | None
    discovered_time: dt.datetime | None
    original_status: str | None
    package_name: str | None
    description: str | None
    original_score: float | None
