from __future__ import annotations

from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from quotaportal import metrics, views

# An outage is a 503 that says what is down; other errors keep each interface's format.
handler403 = "quotaportal.failures.forbidden"
handler404 = "quotaportal.failures.not_found"
handler500 = "quotaportal.failures.server_error"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("healthz", views.healthz, name="healthz"),
    path("metrics", metrics.metrics, name="metrics"),
    # Browsers ask for /favicon.ico whatever the page says.
    path("favicon.ico", RedirectView.as_view(url=static("web/favicon.svg"), permanent=True)),
    path("api/v1/", include("quotaportal.api.urls")),
    path("aws/batch/", include("quotaportal.awsbatch.endpoint.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("", include("quotaportal.web.urls")),
]
