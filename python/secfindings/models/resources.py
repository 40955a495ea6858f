"""Cloud resources (``get_resources_ch``, a finding's ``main_resource``)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from secfindings.models._base import Model

__all__ = ["CHResource"]


class CHResource(Model):
    """A cloud resource. ``tags`` is a GenericScalar: the JSON object as the server sent it."""

    id: str
    id_int: int | None
    resource_id: str | None
    # The spec lists resource_name as the sub-field of a finding's main_resource.
    resource_name: str
    resource_type: str | None
    cloud_provider: str | None
    cloud_account: str | None
    cloud_account_friendly_name: str | None
    region: str | None
    tags: Any | None
    findings_count: int | None
    first_seen: dt.datetime | None
    last_seen: dt.datetime | None
