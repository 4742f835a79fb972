"""A waiting job's reason in words: whole sentences on its page, a few words in lists (the
jobs page, the fleet page, the REST API's `waiting_because`, `qp jobs`)."""

from __future__ import annotations

PLAIN_REASONS = {
    "WAITING_FOR_CAPACITY": "It is within its share's limit and waits for capacity to free up.",
    "SHARE_AT_LIMIT": "Its share is at its limit and its strategy does not borrow.",
    "BORROW_LIMIT_REACHED": "Its share has borrowed as much as its borrow limit allows.",
    "NOTHING_TO_BORROW": "Its share may borrow, but no idle capacity can be lent right now.",
    "EXCEEDS_SHARE_CEILING": (
        "It needs more than its share may ever use (its limit plus borrow limit), so it can "
        "never start; it waits aside so the jobs behind it can start. Terminate it, or ask an "
        "admin to raise the share's limit."
    ),
    "BEHIND_SHARE_HEAD": "An earlier job of its share waits first (strict ordering).",
    "NO_CAPACITY_LIMIT_FOR_UNIT": "Its share has no limit for this capacity unit: it cannot start.",
}
DEPENDENCY_WORDS = {
    "afterok": "starts once it succeeded",
    "afternotok": "starts once it failed",
    "afterany": "starts once it ended",
}
SHORT_REASONS = {  # the jobs list's column: the same reasons in a few words
    "WAITING_FOR_CAPACITY": "waiting for capacity",
    "SHARE_AT_LIMIT": "share at its limit",
    "BORROW_LIMIT_REACHED": "borrow limit reached",
    "NOTHING_TO_BORROW": "nothing idle to borrow",
    "EXCEEDS_SHARE_CEILING": "can never start: too big for its share",
    "BEHIND_SHARE_HEAD": "behind an earlier job",
    "NO_CAPACITY_LIMIT_FOR_UNIT": "can never start: no limit for its unit",
}
