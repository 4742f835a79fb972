"""Building blocks every resource of the REST API shares: named references, capacity limits
as lists, text checks, and the viewset base that finds objects by name."""

from __future__ import annotations

from rest_framework import mixins, serializers, status, viewsets
from rest_framework.response import Response

from quotaportal.quotas import services
from scheduler.validation import MAX_INSTANCES


class NamedRef(serializers.SlugRelatedField):
    """A related object referenced by name, with a clear error for names no row can have."""

    def __init__(self, **kwargs):
        kwargs.setdefault("slug_field", "name")
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if not isinstance(data, str) or "\x00" in data:
            self.fail("invalid")
        return super().to_internal_value(data)


def no_nul_characters(value) -> None:
    """PostgreSQL's jsonb cannot store NUL; reject it with a 400 instead of failing later."""
    if isinstance(value, str):
        if "\x00" in value:
            raise serializers.ValidationError("text may not contain NUL characters")
    elif isinstance(value, dict):
        for key, item in value.items():
            no_nul_characters(key)
            no_nul_characters(item)
    elif isinstance(value, list):
        for item in value:
            no_nul_characters(item)


class CapacityLimitSerializer(serializers.Serializer):
    capacity_unit = serializers.CharField(max_length=64)
    max_capacity = serializers.IntegerField(min_value=0, max_value=MAX_INSTANCES)


def limits_to_dict(items: list[dict]) -> dict[str, int]:
    names = [item["capacity_unit"] for item in items]
    if len(set(names)) != len(names):
        raise serializers.ValidationError({"capacity_limits": "each capacity unit may appear once"})
    return {item["capacity_unit"]: item["max_capacity"] for item in items}


def limits_to_list(limits) -> list[dict]:
    return [
        {"capacity_unit": lim.capacity_unit.name, "max_capacity": lim.max_capacity}
        for lim in limits.all()
    ]


NAME = r"[^/]+"


class NamedViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Resources looked up by name; creation and deletion go through services."""

    lookup_field = "name"
    lookup_value_regex = NAME
    kind_name = ""

    def create(self, request, *args, **kwargs):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        obj = self.create_with_service(serializer.validated_data)
        return Response(self.get_serializer(obj).data, status=status.HTTP_201_CREATED)

    def destroy(self, request, *args, **kwargs):
        services.delete_resource(request.user, self.get_object(), self.kind_name)
        return Response(status=status.HTTP_204_NO_CONTENT)


class _NoBooleans:
    """JSON's true and false are not numbers (DRF would read true as 1)."""

    def to_internal_value(self, data):
        if isinstance(data, bool):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictFloatField(_NoBooleans, serializers.FloatField):
    pass


class StrictIntegerField(_NoBooleans, serializers.IntegerField):
    pass
