from django.urls import path

from apps.agents import views

urlpatterns = [
    path("enrolments/", views.EnrolmentListView.as_view(), name="enrolment-list"),
    path("enrolments/decide/", views.EnrolmentDecideView.as_view(), name="enrolment-decide"),
]
