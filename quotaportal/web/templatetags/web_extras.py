"""Small template helpers for the web pages."""

from __future__ import annotations

from django import template

register = template.Library()

SHARE_MAIN_FIELDS = (
    "job_queue",
    "name",
    "team",
    "sharing_strategy",
    "borrow_limit",
    "in_share_preemption",
    "state",
)


@register.filter
def dictget(mapping, key):
    return mapping.get(key) if mapping else None


@register.filter
def items_or_empty(mapping):
    return mapping.items() if mapping else []


@register.filter
def share_main_fields(form):
    return [form[name] for name in SHARE_MAIN_FIELDS]
