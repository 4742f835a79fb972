"""A person's personal API tokens over REST: list, make (from a signed-in session), revoke.

A token cannot make tokens: a stolen one could otherwise mint a successor that outlives its
revocation. Listing and revoking work with a token too (a script may retire itself)."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.response import Response

from quotaportal.quotas.models import PersonalToken, Scope
from quotaportal.quotas.permissions import is_platform_admin
from quotaportal.quotas.services import tokens


class PersonalTokenSerializer(serializers.ModelSerializer):
    user = serializers.CharField(source="user.username", read_only=True)
    expires_in_days = serializers.IntegerField(
        write_only=True,
        required=False,
        allow_null=True,
        min_value=1,
        max_value=tokens.MAX_DAYS,
        help_text="Days until it stops working; null or absent: never.",
    )
    scope = serializers.ChoiceField(choices=Scope.choices, default=Scope.FULL)

    class Meta:
        model = PersonalToken
        fields = [
            "id",
            "user",
            "name",
            "prefix",
            "scope",
            "created_at",
            "expires_at",
            "expires_in_days",
            "last_used_at",
            "last_used_from",
            "revoked_at",
            "state",
        ]
        read_only_fields = [
            "id",
            "prefix",
            "created_at",
            "expires_at",
            "last_used_at",
            "last_used_from",
            "revoked_at",
            "state",
        ]


class PersonalTokenViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Your personal API tokens (admins: anyone's, with `?user=NAME`). DELETE revokes: the
    next request made with the token is refused."""

    serializer_class = PersonalTokenSerializer

    def get_queryset(self):
        rows = PersonalToken.objects.select_related("user")
        if getattr(self, "swagger_fake_view", False):  # the schema's generator asks, nobody else
            return rows.none()
        wanted = self.request.query_params.get("user")
        if wanted and is_platform_admin(self.request.user):
            return rows.filter(user__username=wanted[:150])
        if self.action == "destroy" and is_platform_admin(self.request.user):
            return rows
        return rows.filter(user=self.request.user)

    def create(self, request, *args, **kwargs):
        if request.auth is not None:  # a token, personal or legacy; a session has none
            raise PermissionDenied(
                "A token cannot make tokens: make one on your Access page, or with this "
                "request from a signed-in session."
            )
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        token, key = tokens.create_token(
            request.user,
            request.user,
            name=data["name"],
            scope=data["scope"],
            expires_in_days=data.get("expires_in_days"),
        )
        answer = {**self.get_serializer(token).data, "key": key}
        return Response(answer, status=status.HTTP_201_CREATED)

    def destroy(self, request, *args, **kwargs):
        token = self.get_object()
        tokens.revoke_token(request.user, token)
        return Response(status=status.HTTP_204_NO_CONTENT)

    def list(self, request, *args, **kwargs):
        wanted = request.query_params.get("user")
        if wanted and not is_platform_admin(request.user):
            raise PermissionDenied("only admins can list someone else's tokens")
        if wanted and not get_user_model().objects.filter(username=wanted[:150]).exists():
            raise NotFound(f"no user named {wanted[:150]!r}")
        return super().list(request, *args, **kwargs)
