"""Who the caller is: their name, whether they are an admin, their teams and the shares they
may submit to (what `qp login` checks a token with, and `qp submit` picks defaults from)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from quotaportal.quotas.models import QuotaShare
from quotaportal.quotas.permissions import is_platform_admin, team_ids


class MeView(APIView):
    @extend_schema(responses={200: dict})
    def get(self, request):
        user = request.user
        admin = is_platform_admin(user)
        shares = QuotaShare.objects.select_related("job_queue", "team").prefetch_related(
            "capacity_limits__capacity_unit"
        )
        if not admin:
            shares = shares.filter(team_id__in=team_ids(user))
        return Response(
            {
                "username": user.get_username(),
                "is_admin": admin,
                "teams": sorted(user.teams.values_list("name", flat=True)),
                "shares": [
                    {
                        "job_queue": share.job_queue.name,
                        "name": share.name,
                        "team": share.team.name,
                        "state": share.state,
                        "units": [lim.capacity_unit.name for lim in share.capacity_limits.all()],
                    }
                    for share in shares.order_by("job_queue__name", "name")
                ],
            }
        )
