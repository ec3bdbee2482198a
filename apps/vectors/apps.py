from django.apps import AppConfig


class VectorsConfig(AppConfig):
    name = "apps.vectors"
    label = "vectors"
    verbose_name = "Regression test vectors"

    def ready(self) -> None:
        from apps.health import stuck  # in ready: models load once the app registry is ready
        from apps.operations import budget
        from apps.vectors import selectors

        # The remediation budget and the stuck-state alarms sit below vectors: they read its runs through these.
        budget.reader_register("vector_runs", selectors.budget_holds)
        stuck.register("vectors", selectors.stuck_runs)  # a run past twice its expected duration
