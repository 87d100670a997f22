"""The order in which step 2 of the wizard ("Worker Config") walks the roles.

Step 2 opens on the Header role; its primary button "Next Role" opens the next role's tab, and only the last role's
button ("Next") goes on to step 3, so a user sees every role before submitting it.
"""

from __future__ import annotations

from typing import Protocol


class _RoleStepState(Protocol):
    """What the order needs of ``jobs.control.wizard.WizardState``: its roles and the Header's index."""

    roles: list
    active_role: int

    @property
    def header_index(self) -> int: ...


def role_order(state: _RoleStepState) -> list[int]:
    """Indexes of ``state.roles`` in the order step 2 shows them: the Header first, then the others as listed."""
    head = state.header_index
    return [head] + [i for i in range(len(state.roles)) if i != head]


def next_role(state: _RoleStepState) -> int | None:
    """The index of the role after ``state.active_role`` in ``role_order``; None after the last role (step 3 next).

    An active role outside the order (e.g. a stale index) counts as the first, so the walk starts at the Header."""
    order = role_order(state)
    if not order:
        return None
    position = order.index(state.active_role) if state.active_role in order else 0
    return order[position + 1] if position + 1 < len(order) else None
