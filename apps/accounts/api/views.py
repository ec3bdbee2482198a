from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.api.serializers import MeSerializer
from apps.accounts.selectors import user_profile
from apps.common.permissions import IsViewer


class MeView(APIView):
    """Who the caller is and which role they hold."""

    permission_classes = [IsViewer]

    @extend_schema(responses=MeSerializer)
    def get(self, request: Request) -> Response:
        return Response(MeSerializer(user_profile(user=request.user)).data)
