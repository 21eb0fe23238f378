from django.contrib import admin
from django.urls import path
from shop import views

urlpatterns = [
    path("admin/", admin.site.urls),  # jobtrail's tasks: /admin/jobtrail/task/
    path("orders", views.place_order),
    path("orders/<int:order_id>", views.order),
]
