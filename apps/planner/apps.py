from django.apps import AppConfig


class PlannerConfig(AppConfig):
    name = "apps.planner"
    label = "planner"
    verbose_name = "Planner"
