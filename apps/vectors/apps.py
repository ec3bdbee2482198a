from django.apps import AppConfig


class VectorsConfig(AppConfig):
    name = "apps.vectors"
    label = "vectors"
    verbose_name = "Regression test vectors"

    def ready(self) -> None:
        from apps.health import stuck
        from apps.vectors import selectors

        stuck.register("vectors", selectors.stuck_runs)  # a run past twice its expected duration
