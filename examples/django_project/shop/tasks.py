"""The shop's task: confirm an order, each part once, however often the task runs."""

try:
    from django.tasks import task  # Django >= 6.0
except ImportError:
    from django_tasks import task  # the backport

from .models import Order


@task(takes_context=True)
def confirm_order(context, order_id: int) -> dict[str, object]:
    order = Order.objects.get(pk=order_id)
    # ctx-style steps through the backend's context: a retry reuses the recorded result
    code = context.step("reserve", lambda: f"R-{order.pk:05d}")
    order.confirmation = code
    order.save(update_fields=["confirmation"])
    return {"order": order.pk, "confirmation": code, "attempt": context.attempt}
