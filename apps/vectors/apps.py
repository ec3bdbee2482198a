from django.apps import AppConfig


class VectorsConfig(AppConfig):
    name = "apps.vectors"
    label = "vectors"
    verbose_name = "Regression test vectors"

    def ready(self) -> None:
        from apps.operations import budget  # in ready: models load once the app registry is ready
        from apps.vectors import selectors  # in ready: models load once the app registry is ready

        # The remediation budget sits below vectors: it reads their automated runs through this reader.
        budget.reader_register("vector_runs", selectors.budget_holds)
