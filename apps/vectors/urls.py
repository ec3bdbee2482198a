from django.urls import path

from apps.vectors import views

urlpatterns = [
    path("vectors/", views.VersionsView.as_view(), name="versions"),
    # the page's first address, kept for bookmarks: the nav's "Vectors" now says where it goes
    path("versions/", views.OldVersionsAddress.as_view()),
    path("vector-runs/<int:pk>/", views.RunDetailView.as_view(), name="vector-run-detail"),
]
