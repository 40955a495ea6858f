"""Types for annotating your own code: the schema's enums as ``Literal`` types and its input
objects as ``TypedDict`` classes.

    from secfindings.types import FindingsViewSortEnum, ScoringRuleInput

    def top(client: secfindings.Client, order: FindingsViewSortEnum = "SCORE_DESC") -> None: ...

They are generated from ``schema/schema.graphql`` (``make generate``), the schema the package was
built against. A type checker therefore knows ``sort="score_desc"`` is wrong before anything
runs; at run time the server's own (live) schema judges every value, with a "did you mean".
A value only your server has (a newer sort key, say) is accepted at run time: pass it with
``typing.cast`` until the package knows it.
"""

from secfindings._operations import (
    ENUMS,
    AggregateFunctions,
    FiltersConfigInput,
    FindingFilterInput,
    FindingFilterSortEnum,
    FindingFilterTypeEnum,
    FindingsViewSortEnum,
    RemediationQueueSortEnum,
    RemediationQueueState,
    ResourcesSortBy,
    RoundFunctions,
    ScoringRuleInput,
    ScoringRuleMethods,
    ScoringRuleSortEnum,
    SLAGroupSortEnum,
    SLAPreferenceSortEnum,
    SLARuleInput,
    StatusRuleInput,
    TicketProviderTypeEnum,
    TicketSLAInput,
    TicketSLARuleSortEnum,
    TimeScales,
)

__all__ = [
    "ENUMS",
    "AggregateFunctions",
    "FiltersConfigInput",
    "FindingFilterInput",
    "FindingFilterSortEnum",
    "FindingFilterTypeEnum",
    "FindingsViewSortEnum",
    "RemediationQueueSortEnum",
    "RemediationQueueState",
    "ResourcesSortBy",
    "RoundFunctions",
    "SLAGroupSortEnum",
    "SLAPreferenceSortEnum",
    "SLARuleInput",
    "ScoringRuleInput",
    "ScoringRuleMethods",
    "ScoringRuleSortEnum",
    "StatusRuleInput",
    "TicketProviderTypeEnum",
    "TicketSLAInput",
    "TicketSLARuleSortEnum",
    "TimeScales",
]
