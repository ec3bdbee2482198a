from django.apps import AppConfig


class RolloutsConfig(AppConfig):
    name = "apps.rollouts"
    label = "rollouts"
    verbose_name = "Driver rollouts"

    def ready(self) -> None:
        from apps.health import stuck
        from apps.rollouts import selectors

        stuck.register("rollouts", selectors.stuck_steps)  # a node's step past twice its expected duration
