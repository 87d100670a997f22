"""``{% load terminal_tags %}{% logs_panel job %}``: the Logs tab inside another page (job detail)."""

from django import template

from terminal.services.panel import logs_panel_context

register = template.Library()


@register.inclusion_tag("terminal/logs_panel.html", takes_context=True)
def logs_panel(context, job):
    """Render the Logs panel for ``job`` (the caller has already checked the user may see it)."""
    ctx = logs_panel_context(context.get("request"), job)
    ctx["request"] = context.get("request")
    ctx["csrf_token"] = context.get("csrf_token")
    ctx["page_tz"] = context.get("page_tz")  # the page's zone (rlark_console.pagetime), for the timestamps' zone
    return ctx
