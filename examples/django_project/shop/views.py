import json

from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from .models import Order
from .tasks import confirm_order


@csrf_exempt
@require_POST
def place_order(request: HttpRequest) -> JsonResponse:
    """Save the order and enqueue its confirmation in one transaction: both or neither."""
    item = json.loads(request.body or b"{}").get("item", "")
    if not isinstance(item, str) or not item:
        return JsonResponse({"error": "item is required"}, status=400)
    with transaction.atomic():
        order = Order.objects.create(item=item)
        result = confirm_order.enqueue(order.pk)
        order.task_id = result.id
        order.save(update_fields=["task_id"])
    return JsonResponse({"order": order.pk, "task": result.id, "status": result.status}, status=202)


@require_GET
def order(request: HttpRequest, order_id: int) -> JsonResponse:
    found = Order.objects.get(pk=order_id)
    result = confirm_order.get_result(found.task_id)
    body = {"order": found.pk, "confirmation": found.confirmation, "status": result.status}
    if result.is_finished and not result.errors:
        body["return_value"] = result.return_value
    return JsonResponse(body)
