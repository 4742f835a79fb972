"""AWS retry strategy: attempts and evaluate_on_exit rules (onStatusReason globs)."""

from __future__ import annotations

MAX_RULES = 5


def check_evaluate_on_exit(rules) -> str | None:
    if not isinstance(rules, list) or len(rules) > MAX_RULES:
        return f"evaluate_on_exit must be a list of at most {MAX_RULES} rules"
    for rule in rules:
        if not isinstance(rule, dict) or rule.get("action") not in ("RETRY", "EXIT"):
            return "each evaluate_on_exit rule needs action RETRY or EXIT"
        pattern = rule.get("on_status_reason", "*")
        if not isinstance(pattern, str) or "*" in pattern[:-1]:
            return "on_status_reason is a text that may end with one '*'"
        if set(rule) - {"action", "on_status_reason"}:
            return "evaluate_on_exit rules take only action and on_status_reason"
    return None


def matches(pattern: str, reason: str) -> bool:
    """AWS glob: exact text, or a prefix when the pattern ends with '*'."""
    if pattern.endswith("*"):
        return reason.startswith(pattern[:-1])
    return reason == pattern


def should_retry(
    rules: list[dict], status_reason: str, attempts_used: int, attempts_allowed: int
) -> bool:
    """Retry while attempts remain, unless the first matching rule says EXIT.

    With no matching rule the job is retried (AWS: "If none of the EvaluateOnExit
    conditions match, then the job is retried").
    """
    if attempts_used >= attempts_allowed:
        return False
    for rule in rules:
        if matches(rule.get("on_status_reason", "*"), status_reason):
            return rule["action"] == "RETRY"
    return True
