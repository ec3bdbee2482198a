from django.db import models


class Source(models.TextChoices):
    API = "api", "API"
    BROWSER = "browser", "Browser"
    ADMIN = "admin", "Admin"
    SYSTEM = "system", "System"
