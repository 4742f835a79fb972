"""Small template helpers for the web pages."""

from __future__ import annotations

from django import template
from django.utils.html import format_html, format_html_join

from quotaportal.web import numbers

register = template.Library()

SHARE_MAIN_FIELDS = (
    "job_queue",
    "name",
    "team",
    "sharing_strategy",
    "borrow_limit",
    "in_share_preemption",
    "state",
    "fair_share_weight",
)


@register.filter(name="duration")
def duration_filter(seconds):
    """Seconds as '2 min 10 s' (web.numbers.duration)."""
    return numbers.duration(seconds)


@register.filter(name="instance_hours")
def instance_hours_filter(hours):
    return numbers.instance_hours(hours)


@register.filter(name="hours")
def hours_filter(hours):
    return numbers.hours_figure(hours)


@register.filter(name="starts_in")
def starts_in_filter(moment):
    return numbers.starts_in(moment)


@register.filter(name="ratio")
def ratio_filter(value):
    return numbers.ratio(value)


@register.filter(name="percent")
def percent_filter(value):
    return numbers.percent(value)


@register.filter
def divide(value, by):
    """value / by, or None when either is missing or `by` is 0 (shown as '—')."""
    try:
        return float(value) / float(by) if by else None
    except (TypeError, ValueError):
        return None


@register.filter
def dictget(mapping, key):
    return mapping.get(key) if mapping else None


@register.filter
def items_or_empty(mapping):
    return mapping.items() if mapping else []


@register.filter
def share_main_fields(form):
    return [form[name] for name in SHARE_MAIN_FIELDS]


@register.simple_tag
def share_bar(figures) -> str:
    """One share's use of one unit as a bar; built in Python because the dashboard shows
    hundreds and the template loop dominated its render time."""
    parts = format_html_join(
        "",
        '<span class="{}" style="width: {}%" title="{} {}"></span>',
        ((part, pct, n, part) for part, n, pct in figures["segments"] if n),
    )
    label = (
        f"{figures['own']} own, {figures['borrowed']} borrowed, {figures['lent']} lent out, "
        f"{figures['idle']} idle; limit {figures['limit']}"
    )
    total = sum(n for _, n, _ in figures["segments"]) or 1
    # A mark where the share's limit falls, so "2 used of 1" shows in the bar too.
    mark = format_html(
        '<i class="limit" style="left: calc({}% - 2px)" title="limit {}"></i>',
        round(100 * figures["limit"] / total, 2),
        figures["limit"],
    )
    return format_html('<div class="bar" role="img" aria-label="{}">{}{}</div>', label, parts, mark)
