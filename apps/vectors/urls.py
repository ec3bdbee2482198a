from django.urls import path
from django.views.generic import RedirectView

from apps.vectors import views

urlpatterns = [
    path("vectors/", views.VersionsView.as_view(), name="versions"),
    # the page's first address, kept for bookmarks: the nav's "Vectors" now says where it goes
    path("versions/", RedirectView.as_view(pattern_name="versions", permanent=True, query_string=True)),
    path("vector-runs/<int:pk>/", views.RunDetailView.as_view(), name="vector-run-detail"),
]
