"""The effect protocol's own events: they resolve, or fail to resolve, an intent of any aggregate.

Each is recorded on its intent's stream and names the intent by ``intent_id``.
"""


from typing import Annotated

from pydantic import Field

from ..kernel.values import MAX_SAFE_INT
from .base import Event, Id, Text, Timestamp

__all__ = ["IntentCancelled", "IntentOutcomeUnknown", "IntentOutcomeUnknownV2"]


class IntentOutcomeUnknown(Event):
    """Legacy (v1): outcome not known yet; the next effector pass observed again."""

    name = "IntentOutcomeUnknown"
    effect_role = "unknown"
    intent_id: Id
    reason: Text


class IntentOutcomeUnknownV2(Event):
    """The outcome is not known yet; never a failure, and nothing is redone blindly.

    Recorded when the observation changes, or when the back-off has run out and it is
    still the same: ``observations`` counts the records in a row with this reason, and
    no effector observes the intent again on its own before ``retry_at``.
    """

    name = "IntentOutcomeUnknown"
    schema_version = 2
    effect_role = "unknown"
    intent_id: Id
    reason: Text
    observations: Annotated[int, Field(ge=1, le=MAX_SAFE_INT)]
    retry_at: Timestamp


class IntentCancelled(Event):
    """Outcome: the intent will not be carried out (its run was aborted before it was)."""

    name = "IntentCancelled"
    effect_role = "outcome"
    intent_id: Id
    reason: Text
