from __future__ import annotations

from django.urls import path

from quotaportal.awsbatch.endpoint import views

app_name = "awsbatch"
urlpatterns = [
    path("v1/tags/<path:resource_arn>", views.tags_view, name="tags"),
    path("v1/<str:name>", views.operation_view, name="operation"),
]
