from django.apps import AppConfig


class HealthConfig(AppConfig):
    name = "apps.health"
    label = "health"
    verbose_name = "Health checks"

    def ready(self) -> None:
        from apps.health import stuck

        stuck.register("commands", stuck.overdue_commands)
