from django.conf import settings
from django.db import models

from apps.audit.choices import Source


class AuditEvent(models.Model):
    """One record per operator-visible change, written in the change's transaction."""

    time = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    actor_name = models.CharField(max_length=150, help_text="Username at the time, or the system component")
    credential = models.CharField(max_length=64, blank=True, default="", db_default="",
                                  help_text="The credential the actor acted with, when not its own login "
                                            "(a service account's token: 'service token 12')")
    action = models.CharField(max_length=64, db_index=True, help_text="e.g. node.create, node.update")
    target_type = models.CharField(max_length=64, db_index=True)
    target_id = models.CharField(max_length=64, blank=True, default="")
    target_repr = models.CharField(max_length=200, blank=True, default="")
    reason = models.TextField(blank=True, default="")
    changes = models.JSONField(default=dict, blank=True, help_text="{field: [before, after]}")
    request_id = models.CharField(max_length=64, blank=True, default="", db_index=True)
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.API)
    related_type = models.CharField(max_length=64, blank=True, default="", help_text="Work this action started")
    related_id = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        ordering = ["-time", "-id"]
        indexes = [models.Index(fields=["target_type", "target_id"])]

    def __str__(self) -> str:
        return f"{self.time:%Y-%m-%d %H:%M:%S} {self.actor_name} {self.action} {self.target_repr}"
