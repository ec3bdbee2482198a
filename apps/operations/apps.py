from django.apps import AppConfig


class OperationsConfig(AppConfig):
    name = "apps.operations"
    label = "operations"
    verbose_name = "Fleet operations"
